package turn

// For the tests of package turn_test.
var (
	SchemaAccepts  = schemaAccepts
	SchemaNamed    = schemaNamed
	ValidateSchema = validateSchema
	CheckEncoding  = checkEncoding
)
