// Package events is the change feed of docs/events.md: a bounded in-memory
// ring of what changed in the workspace (mutations through the tools,
// changes made outside the API, seen through inotify), fanned out to
// server-sent-event subscribers that never slow the publisher down.
//
// It knows nothing of the tool executor or the transports: the executor's
// mutation hook calls Hub.Publish, a Watcher publishes external changes, and
// the REST router mounts Hub.Handler.
package events

import (
	"encoding/json"

	"github.com/toolfs/toolfs-api/internal/render"
)

// Type is what an event reports (docs/events.md, "Events").
type Type string

// The event types.
const (
	// TypeWrite and TypeEdit are successful mutations through a tool call.
	TypeWrite Type = "write"
	TypeEdit  Type = "edit"
	// TypeRevert is one file a revert of a session's changes restored
	// (docs/checkpoints.md): one event per file.
	TypeRevert Type = "revert"
	// TypeUpload and TypeDelete are a person's upload and delete through
	// PUT and DELETE /files (docs/files.md): no diffs; a delete no version.
	TypeUpload Type = "upload"
	TypeDelete Type = "delete"
	// TypeMkdir is a folder the mkdir tool made (SPEC §26); a move is a
	// delete of its source and a write of its destination.
	TypeMkdir Type = "mkdir"
	// TypeCreated, TypeModified, TypeRemoved and TypeRenamed are changes made
	// outside the API. A rename is reported as TypeRenamed on the old path
	// and TypeCreated on the new one when it stays under the root.
	TypeCreated  Type = "created"
	TypeModified Type = "modified"
	TypeRemoved  Type = "removed"
	TypeRenamed  Type = "renamed"
	// TypeOverflow says the kernel dropped change notifications: some
	// external changes were not reported.
	TypeOverflow Type = "overflow"
	// TypeReset says the stream cannot account for everything since the
	// subscriber's last event: reload what you show, then continue.
	TypeReset Type = "reset"
	// TypeApproval is a sandbox escalation waiting for a person's decision
	// (docs/sandbox.md); Approval holds it.
	TypeApproval Type = "approval"
)

// Event is one change. Path is relative to the workspace root, '/'
// separated, never empty for a change and empty for overflow and reset.
// Session, Version and Diffs belong to mutations only.
type Event struct {
	Type    Type
	Path    string
	Session string
	// Subject is the verified subject of the call that made the change or
	// asks the approval ("" without one, and for external changes): only
	// that subject's subscribers, and admins, receive it
	// (docs/identity.md). It is not part of the event's JSON.
	Subject string
	Version string
	Diffs   []render.Diff
	// Approval is the pending approval of a TypeApproval event, as GET
	// /approvals lists it.
	Approval any
}

// isMutation reports whether the event came through a tool call (and so
// carries diffs).
func (t Type) isMutation() bool { return t == TypeWrite || t == TypeEdit || t == TypeRevert }

// isOwn reports whether the event is a change made through the API, whose
// inotify echo the watcher must not report again: a tool call's, an
// upload's or a delete's. A delete's version is removedVersion.
func (t Type) isOwn() bool { return t.isMutation() || t == TypeUpload || t == TypeDelete }

// removedVersion stands for "no file" in the memory of own changes: a
// delete's echo is a removal of a path whose file is gone.
const removedVersion = "-"

// ownVersion is the version an own change leaves its path at.
func (e Event) ownVersion() string {
	if e.Type == TypeDelete {
		return removedVersion
	}
	return e.Version
}

// wire is the JSON form of an event. Diffs is a pointer so that a mutation
// without hunks (a create) still says "diffs": [].
type wire struct {
	Type         Type           `json:"type"`
	Path         string         `json:"path,omitempty"`
	Session      string         `json:"session,omitempty"`
	Version      string         `json:"version,omitempty"`
	Diffs        *[]render.Diff `json:"diffs,omitempty"`
	DiffsOmitted bool           `json:"diffsOmitted,omitempty"`
	Approval     any            `json:"approval,omitempty"`
}

// encode is the event's JSON. A mutation whose encoding would pass maxBytes
// loses its diffs and says so with "diffsOmitted": true, so one huge edit
// cannot pin megabytes in the ring and in every subscriber's queue.
func (e Event) encode(maxBytes int) []byte {
	w := wire{Type: e.Type, Path: e.Path, Session: e.Session, Version: e.Version, Approval: e.Approval}
	if e.Type.isMutation() {
		d := e.Diffs
		if d == nil {
			d = []render.Diff{}
		}
		w.Diffs = &d
	}
	// The texts alone pass the bound: leave them out without encoding them
	// (a 9 MiB rewrite would cost its JSON on the call's own time).
	if textBytes(e.Diffs) <= maxBytes {
		if b, err := json.Marshal(w); err == nil && len(b) <= maxBytes {
			return b
		}
	}
	w.Diffs, w.DiffsOmitted = nil, w.Diffs != nil
	b, err := json.Marshal(w)
	if err != nil { // strings and bools only: cannot fail
		return []byte(`{"type":"` + string(e.Type) + `"}`)
	}
	return b
}

// textBytes is the size of the diffs' texts, a lower bound of their JSON.
func textBytes(diffs []render.Diff) int {
	n := 0
	for _, d := range diffs {
		n += len(d.Path) + len(d.NewText)
		if d.OldText != nil {
			n += len(*d.OldText)
		}
	}
	return n
}
