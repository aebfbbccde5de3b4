package retention

var (
	IsInstruction = isInstruction
	IsPath        = isPath
)

var (
	ReportsError = reportsError
	ErrorLine    = errorLine
)
