package llm

// Models maps a task to the model its calls use. A provider's config holds
// one beside its default model.
type Models map[Task]string

// Pick returns the model of req: req.Model when set, else the model of
// req.Task, else def.
func (m Models) Pick(req Request, def string) string {
	if req.Model != "" {
		return req.Model
	}
	if model := m[req.Task]; model != "" {
		return model
	}
	return def
}
