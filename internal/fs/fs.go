// Package fs is the provider seam every file tool goes through, and its local
// implementation over a workspace root.
//
// The seam owns resolution and confinement, metadata, raw reads of regular
// files, and atomic, optionally guarded mutation, and its Workspace answers
// where targets lie (Within, Rel), which names are its own (IsPrivate) and
// holds folders by descriptor (OpenBeneath) for search and the change feed.
// It knows nothing of HTTP, sessions or the model-facing window: another
// backend can replace Local without touching policy, render, the executor,
// search, events or the transports.
//
// OpenText hands back raw bytes: the NUL and UTF-8 checks of a read are not
// done here but by internal/render, fused with windowing in a single pass.
// EditText does its own checks over the whole file, since it must refuse
// before writing anything.
//
// Local is Linux-only (openat, O_PATH, renameat2, flock).
package fs

import (
	"context"
	"io"
	"time"
)

// FileSystem is the provider seam. Every method honours ctx cancellation at
// its syscall boundaries and returns *fault.Error for anything a caller can act on.
// Its Workspace answers what the rest of the server needs to know of where
// targets lie and which names are the provider's own.
type FileSystem interface {
	Workspace

	// Resolve turns path (absolute, or relative to cwd; cwd absolute, or
	// relative to the root; "" means the root) into a Target. It refuses paths
	// that leave the workspace root with fault.CodeSandboxDenied, using op ("read",
	// "write", "edit", "search", ...) in the message. A missing target
	// resolves fine: its Key names where it would be created (the local
	// provider's: the real path of its nearest existing ancestor plus the
	// missing suffix).
	Resolve(ctx context.Context, op, path, cwd string) (Target, error)

	// Stat reports what the target is now, following symlinks. A missing
	// target is Info{Type: TypeMissing} and a nil error.
	Stat(ctx context.Context, t Target) (Info, error)

	// OpenText opens a regular file for reading and reports the Info of the
	// opened file (so the version describes the bytes being read). FIFOs,
	// sockets and devices are never opened for reading: they are
	// fault.CodeNotRegularFile. The bytes are raw: text checks are the reader's.
	// The local provider's reader is also an io.ReaderAt, which a cached
	// read uses to start deep in the file.
	OpenText(ctx context.Context, t Target) (io.ReadCloser, Info, error)

	// WriteText atomically creates or replaces the target with content under
	// the target's lock. A nil intent is unconditional.
	WriteText(ctx context.Context, t Target, content string, intent *WriteIntent) (WriteOutcome, error)

	// EditText applies a literal edit under the target's lock. A non-nil
	// expected version is checked before matching; a missing target is always
	// fault.CodeStaleVersion.
	EditText(ctx context.Context, t Target, edit EditRequest, expected *Version) (EditOutcome, error)
}

// ResolveStater is a FileSystem that resolves a path and stats its target
// in one walk. ResolveStat returns what Resolve and then Stat of its Target
// would, with no second walk: the tool executor uses it for a read, which
// is one provider Stat either way.
type ResolveStater interface {
	ResolveStat(ctx context.Context, op, path, cwd string) (Target, Info, error)
}

var _ ResolveStater = (*Local)(nil)

// TargetKey identifies a file independently of the path used to reach it
// (the local provider's is the real path). It is opaque: callers compare
// Keys for equality and ask the provider's Workspace where one lies.
type TargetKey string

// Version is an opaque freshness token. The local provider derives it from
// dev:ino:size:mtime_ns:ctime_ns of the followed target. Callers only compare
// versions for equality.
type Version string

// Hash identifies a file's bytes: the local provider's is the 128-bit
// XXH3 of the content, in hex. "" means unknown. Callers only compare
// hashes for equality, and only the provider computes them.
type Hash string

// Observed is what a session saw of a present file: its version and, when
// known, the hash of its bytes (docs/edits.md, "No false staleness").
type Observed struct {
	Version Version
	Hash    Hash
}

// ContentHasher is implemented by the readers OpenText returns: once the
// reader reached EOF, ContentHash is the Hash of every byte it gave.
type ContentHasher interface {
	ContentHash() (Hash, bool)
}

// Target is a resolved path: Key for identity (locks, observations) and
// Display for every model-facing text.
type Target struct {
	Key     TargetKey
	Display string
}

// FileType is what a path names now.
type FileType int

// The file types Stat reports.
const (
	TypeMissing FileType = iota
	TypeFile
	TypeDirectory
	TypeOther // FIFO, socket, device, or anything else that is not text
)

func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDirectory:
		return "directory"
	case TypeOther:
		return "other"
	}
	return "missing"
}

// Info is metadata only. Size is -1 when unknown; Version is empty for a
// missing target. Changed is the change time (ctime) the version was taken
// at, zero when unknown: caches keyed by version use it for their
// racy-timestamp rule (docs/performance.md, "Caches").
type Info struct {
	Type    FileType
	Size    int64
	Version Version
	Changed time.Time
	// Mode is the permission bits (0o777); 0 for a missing target.
	Mode uint32
}

// IntentKind is the precondition of a guarded write.
type IntentKind int

// The write preconditions the policy can ask for.
const (
	// CreateIfAbsent publishes without ever replacing an existing entry.
	CreateIfAbsent IntentKind = iota + 1
	// ReplaceIfVersion replaces only while the target is still at Version.
	ReplaceIfVersion
)

// WriteIntent is the precondition of a write. A nil *WriteIntent, or a zero
// Kind, means unconditional (the lock and atomicity remain).
type WriteIntent struct {
	Kind    IntentKind
	Version Version // for ReplaceIfVersion
	// Hash (for ReplaceIfVersion) is the hash of the bytes seen at Version:
	// a file at another version whose bytes still have this hash is
	// replaced, not stale ("" = compare versions only).
	Hash Hash
	// DryRun runs every check under the lock and computes the diff basis,
	// but stages, publishes and creates nothing (docs/edits.md).
	DryRun bool
	// Keeper, when set, keeps what the write replaces (docs/checkpoints.md);
	// not called for a dry run. With a nil Kind the write stays
	// unconditional.
	Keeper Keeper
}

// Operation says whether a write created or replaced its target.
type Operation string

// The two write operations.
const (
	OpCreate Operation = "create"
	OpUpdate Operation = "update"
)

// WriteOutcome is a successful write. Before is the previous content as an
// LF-normalized diff basis, nil for a create or when the provider declines a
// basis (not UTF-8, or either side at or above the diff-basis limit). After
// is the LF-normalized new content, set only when Before is. BeforeRaw is
// the previous content's exact bytes (CRLF and any encoding kept, for a
// checker that must see the file as it was: docs/diagnostics.md), under
// the same size limit but whatever its encoding; nil for a create.
// AfterRaw is the content written, nil at or above the diff-basis limit:
// the provider's limit is the only one, so a caller asks AfterRaw, not a
// size, whether the new text may be diffed or checked (a create's diff is
// against "").
type WriteOutcome struct {
	Operation Operation
	Version   Version
	Hash      Hash // of the content written ("" for a dry run)
	Before    *string
	After     string
	BeforeRaw *string
	AfterRaw  *string
}

// EditRequest is a literal replacement, or a batch of them. OldString is
// non-empty and differs from NewString (the caller validates arguments).
type EditRequest struct {
	OldString  string
	NewString  string
	ReplaceAll bool
	// Batch, when non-nil, replaces the three fields above: the edits apply
	// in order, each to the result of the ones before, all or nothing, and
	// an edit's failure is prefixed "edit <i> of <n>: ". The file is held in
	// memory, so a batch on a file above BatchMaxBytes is fault.CodeTooLarge.
	Batch []Edit
	// Rewrite, when non-nil, replaces the literal fields and Batch: it is
	// handed the whole file (after the version and text checks, under the
	// lock; at most BatchMaxBytes) and returns its new content, or the
	// error the edit fails with (edit_lines's applier, docs/edits.md).
	Rewrite func(text []byte) ([]byte, error)
	// DryRun runs every check under the lock and computes the diff basis,
	// but stages and publishes nothing; the outcome's Version is the file's
	// current one.
	DryRun bool
	// Hints asks, on a miss, for the most similar text and, on an ambiguous
	// edit, for the lines of the matches (Error.Hint).
	Hints bool
	// Tolerant is the extended profile's edit (SPEC §25, docs/edits.md,
	// "Tolerant edits"): new_string follows a one-kind file's line endings,
	// and where old_string does not occur literally the levels after the
	// literal one are tried. Without it only §4's rules apply. A single
	// edit of a file above BatchMaxBytes gets levels 0 and 1 only.
	Tolerant bool
	// SeenHash is the hash of the bytes seen at the expected version: a
	// file at another version whose bytes still have this hash is edited,
	// not stale ("" = compare versions only).
	SeenHash Hash
	// Keeper, when set, keeps what the edit replaces (docs/checkpoints.md);
	// not called for a dry run.
	Keeper Keeper
}

// Edit is one item of a batch.
type Edit struct {
	OldString  string
	NewString  string
	ReplaceAll bool
}

// BatchMaxBytes is the largest file (before and after each edit) a batch
// edit holds in memory, and the largest file a hint is searched in.
const BatchMaxBytes = 64 << 20

// EditOutcome is a successful edit. Before and After are LF-normalized diff
// bases, nil when the file is at or above the diff-basis limit; BeforeRaw
// and AfterRaw are the same two versions' exact bytes (CRLF kept, for a
// checker that must see the file as it is: docs/diagnostics.md), set when
// Before is.
type EditOutcome struct {
	Version      Version
	Hash         Hash // of the new content ("" for a dry run)
	Replacements int
	// Size is the new content's byte count (0 for a dry run), so an audit
	// record need not stat the file again.
	Size      int64
	Before    *string
	After     *string
	BeforeRaw *string
	AfterRaw  *string
	// Tolerances are the edits that found their place at a disclosed
	// level (2-6), in batch order.
	Tolerances []Tolerance
}

// Tolerance is how one edit found its place when old_string did not occur
// literally, at a level the answer discloses (LevelPrefixes to
// LevelPunct).
type Tolerance struct {
	Item  int // the batch item, 1-based; 0 for a single edit
	Level int
	Count int // places replaced
	// Places are each place's first and last line (1-based) in the text
	// the edit saw, the first HintMaxLines+1 of them.
	Places [][2]int
}
