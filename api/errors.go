package api

// ErrorBody is the body of every error Mnemos's own API answers (the
// document's Error).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what an ErrorBody says.
type ErrorDetail struct {
	// Code is stable and machine-readable ("not_found", "too_large", …).
	Code string `json:"code"`
	// Message is for people; it may change.
	Message string `json:"message"`
}

// AnthropicErrorBody is the body of an error of the model proxy (POST
// /v1/messages and count_tokens), in the Messages API's shape (the
// document's AnthropicError): Type is "error".
type AnthropicErrorBody struct {
	Type  string          `json:"type"`
	Error AnthropicDetail `json:"error"`
}

// AnthropicDetail is what an AnthropicErrorBody says: the Messages API's
// error type ("invalid_request_error", …) and a message.
type AnthropicDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// OpenAIErrorBody is the body of an error of the model proxy's OpenAI
// routes, in OpenAI's shape (the document's OpenAIError).
type OpenAIErrorBody struct {
	Error OpenAIDetail `json:"error"`
}

// OpenAIDetail is what an OpenAIErrorBody says: a message, OpenAI's error
// type ("invalid_request_error", "server_error"), the parameter at fault
// (null when none) and Mnemos's code.
type OpenAIDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}
