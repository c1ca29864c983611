package render

// The file operations of the extended profile (SPEC §26, docs/files.md
// "Move, delete and mkdir"): their declarations, argument messages and
// model texts.

// The argument messages of move, delete and mkdir (docs/api.md,
// "Argument messages").
const (
	MsgFrom       = "from must be a non-empty string"
	MsgMoveTo     = "to must be a non-empty string"
	MsgOverwrite  = "overwrite must be a boolean"
	MsgFolderPath = "path must be a non-empty string"
)

// MsgArgNUL is the message of a path argument holding a NUL byte.
func MsgArgNUL(name string) string { return name + " must not contain a NUL byte" }

// MovedOutput is move's success text.
func MovedOutput(from, to string) string { return "Moved " + from + " to " + to + "." }

// DeletedOutput is delete's success text.
func DeletedOutput(display string) string { return "Deleted " + display + "." }

// CreatedFolderOutput is mkdir's success text, also for a folder that
// existed already.
func CreatedFolderOutput(display string) string { return "Created folder " + display + "." }

// The changes as an approval shows them to a person before they run
// (docs/sandbox.md): the plan, in the imperative.
func MoveShown(from, to string) string  { return "Move " + from + " to " + to + "." }
func DeleteShown(display string) string { return "Delete " + display + "." }
func MkdirShown(display string) string  { return "Create folder " + display + "." }

// MsgMoveExists refuses a move onto an existing destination without
// overwrite (FS_ALREADY_EXISTS).
func MsgMoveExists(to string) string {
	return `cannot move to "` + to + `": it exists; pass overwrite: true after reading it`
}

// MsgNotEmpty refuses the delete of a folder that holds anything
// (FS_NOT_EMPTY).
func MsgNotEmpty(display string) string {
	return `cannot delete "` + display + `": the folder is not empty`
}

// MsgTheRoot refuses an operation on the workspace root itself.
func MsgTheRoot(verb, display string) string {
	return `cannot ` + verb + ` "` + display + `": it is the workspace root`
}

// MsgNotAFolder refuses mkdir over something that is not a folder.
func MsgNotAFolder(display string) string {
	return `cannot create folder "` + display + `": a file is in the way`
}

// MsgMoveInto refuses moving a folder into itself.
func MsgMoveInto(from, to string) string {
	return `cannot move "` + from + `" into itself ("` + to + `")`
}

// MsgMoveFolderOver refuses overwrite of or by a folder: only a file
// replaces a file.
func MsgMoveFolderOver(to string) string {
	return `cannot move to "` + to + `": overwrite replaces a file with a file, never a folder`
}

// The declarations of move, delete and mkdir, in catalog order after the
// search tools; Extended: the original profile does not list them.
var (
	moveDecl = Decl{
		Name:        "move",
		Extended:    true,
		Description: "Move or rename a file or folder inside the workspace. Refuses an existing destination unless overwrite is true and that destination file was read first.",
		Guidance:    "Use the move tool \u2014 not shell mv \u2014 to rename or move a file or folder. Read a file before moving it (the default fs-policy requires it). An existing destination is replaced only with overwrite set to true, after reading it; missing parent folders of the destination are created.",
		Params: concat(
			[]Param{
				{Name: "from", Type: "string", Required: true, Message: MsgFrom, Description: "Path of the file or folder to move, resolved by the filesystem backend."},
				{Name: "to", Type: "string", Required: true, Message: MsgMoveTo, Description: "Its new path, resolved by the filesystem backend."},
				{Name: "overwrite", Type: "boolean", Message: MsgOverwrite, Description: "Replace an existing destination file (read it first). Defaults to false."},
			},
			escalationParams,
		),
	}
	deleteDecl = Decl{
		Name:        "delete",
		Extended:    true,
		Description: "Delete a file, or an empty folder. The file must have been read in this session and be unchanged since; a folder that holds anything is never deleted.",
		Guidance:    "Use the delete tool \u2014 not shell rm \u2014 to remove a file you read, or an empty folder. A folder that holds anything is refused: delete its files first.",
		Params: concat(
			[]Param{
				{Name: "file_path", Type: "string", Required: true, Message: MsgFilePath, Description: "Path of the file or empty folder to delete, resolved by the filesystem backend."},
			},
			escalationParams,
		),
	}
	mkdirDecl = Decl{
		Name:        "mkdir",
		Extended:    true,
		Description: "Create a folder, with any missing parent folders. An existing folder is fine.",
		Guidance:    "Use the mkdir tool \u2014 not shell mkdir \u2014 to create a folder. write creates a file's missing parent folders by itself.",
		Params: concat(
			[]Param{
				{Name: "path", Type: "string", Required: true, Message: MsgFolderPath, Description: "Path of the folder to create, resolved by the filesystem backend."},
			},
			escalationParams,
		),
	}
)
