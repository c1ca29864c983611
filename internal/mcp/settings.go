package mcp

import "flag"

// Settings are the MCP transport's flags (docs/mcp.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). Its session
// bounds are the policy's (--max-sessions, --session-ttl), its body cap
// --max-body-bytes: the builder hands them to Config.
type Settings struct {
	Structured bool // --mcp-structured
}

// RegisterFlags binds s to the MCP transport's flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.BoolVar(&s.Structured, "mcp-structured", false, "add each tool's metadata to its MCP result as structuredContent (Claude Code and Codex were seen to show the model that JSON instead of the text, so the model loses the exact text; docs/mcp.md)")
}
