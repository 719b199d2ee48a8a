package readme

// The README tests (package readme_test) check these helpers directly.
var (
	InlineCommands = inlineCommands
	Synopsis       = synopsis
	InlineFlags    = inlineFlags
)
