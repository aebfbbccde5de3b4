package retention

var (
	IsInstruction = isInstruction
	IsPath        = isPath
)
