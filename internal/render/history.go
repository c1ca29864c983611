package render

// MsgTo is the argument message of revert's to.
const MsgTo = "to must be a non-negative integer: the seq to go back to (0 undoes every change)"

// HistoryTools declares the checkpoint tools (docs/checkpoints.md): the
// same operations as GET /sessions/{id}/changes and POST
// /sessions/{id}/revert, on the calling session. They are offered over MCP
// in the extended profile only, with checkpoints on, and are no part of
// the catalog (GET /tools, the original profile's surface).
var HistoryTools = []Decl{
	{
		Name:        "changes",
		Description: "List the changes this session's writes and edits made, newest first: seq, tool, path and the lines added and removed. Use a seq with revert to undo the changes after it.",
		Params:      []Param{},
	},
	{
		Name:        "revert",
		Description: "Undo this session's changes after seq to (0 undoes them all), all or nothing: nothing is restored when any file changed since this session's last change to it. Set dry_run to see the diffs without writing anything.",
		// A revert is fenced as write and edit are, so it takes their
		// escalation (docs/sandbox.md).
		Params: concat(
			[]Param{
				{Name: "to", Type: "number", Required: true, Message: MsgTo, Description: "The seq to go back to: every change after it is undone; 0 undoes every change of this session."},
				{Name: "dry_run", Type: "boolean", Message: MsgDryRun, Description: "Check everything and return the diffs without writing anything. Defaults to false."},
			},
			escalationParams,
		),
	},
}

// HistoryCatalog lists HistoryTools as catalog entries; fenced (a
// sandbox mode other than off) adds revert's escalation arguments.
func HistoryCatalog(fenced bool) []Tool {
	out := make([]Tool, 0, len(HistoryTools))
	for _, d := range HistoryTools {
		var shown []Param
		for _, p := range d.Params {
			if !p.Fenced || fenced {
				shown = append(shown, p)
			}
		}
		out = append(out, Tool{Name: d.Name, Description: d.Description, Parameters: schema(shown, ""), Guidance: d.Guidance})
	}
	return out
}
