package mcp

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Escalations asked of the MCP client's own user (docs/sandbox.md,
// "Approving in the client"): on the revisions with sessions an
// elicitation request inside the session (ServerSession.Elicit); on the
// sessionless ones an input_required result whose request state is
// sealed here, so that any replica can take the retry and nothing waits.

// inputKey names the one input request of an escalation's input_required
// result, and the answer its retry carries.
const inputKey = "approval"

// The form's one field and its two values.
const (
	fieldDecision  = "decision"
	decisionYes    = "approve"
	decisionNo     = "reject"
	stateVersion   = "v1."
	sealAdditional = "toolfs-api escalation answer v1"
)

// msgAnswerRefused starts the text of a retry whose answer is refused: its
// state forged, altered, expired, replayed or another call's. Nothing ran.
const msgAnswerRefused = "cannot accept the answer to the approval request: "

// The reasons of msgAnswerRefused.
const (
	reasonForged   = "its request state was not issued by this server, or was altered"
	reasonExpired  = "it expired; call again without inputResponses and requestState to be asked again"
	reasonReplayed = "it was used already; call again without inputResponses and requestState to be asked again"
	reasonOther    = "it was given for another call"
	reasonNoAnswer = `the retry carries no answer to "` + inputKey + `"`
	reasonStore    = "the answers store is unavailable; retry shortly"
)

func refused(reason string) *fault.Error {
	return fault.New(fault.CodeEscalationDenied, msgAnswerRefused+reason)
}

// schema is the form the user fills: approve or reject.
var schema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		fieldDecision: map[string]any{
			"type":        "string",
			"title":       "Decision",
			"description": "approve runs exactly the change shown; reject refuses it",
			"enum":        []string{decisionYes, decisionNo},
		},
	},
	"required": []string{fieldDecision},
}

// question is the elicitation of q: its message shows the tool, the
// files, the reason and the diff (docs/sandbox.md).
func question(q tools.Question) *sdk.ElicitParams {
	a := q.Approval
	var b strings.Builder
	b.WriteString("toolfs-api asks for your approval.\n")
	fmt.Fprintf(&b, "Tool: %s\nPath: %s\n", a.Tool, a.Path)
	if len(a.Paths) > 1 {
		fmt.Fprintf(&b, "Paths: %s\n", strings.Join(a.Paths, ", "))
	}
	fmt.Fprintf(&b, "Reason: %s\n\n%s", a.Reason, a.Diff)
	if a.Truncated {
		b.WriteString("\n(the diff is cut here)")
	}
	return &sdk.ElicitParams{Mode: "form", Message: b.String(), RequestedSchema: schema}
}

// decisionOf reads the user's answer: only an explicit approve approves.
func decisionOf(r *sdk.ElicitResult) (tools.Decision, error) {
	switch {
	case r == nil:
		return "", errors.New("no answer")
	case r.Action == "cancel":
		return "", tools.ErrAskCancelled
	case r.Action == "accept" && r.Content[fieldDecision] == decisionYes:
		return tools.Approve, nil
	}
	return tools.Reject, nil
}

// canElicit reports whether the client declared the form elicitation.
func canElicit(req *sdk.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil // neither: form, as the specification says
}

// sessionAsker asks in the MCP session, waiting for the answer.
type sessionAsker struct{ ss *sdk.ServerSession }

func (a sessionAsker) Later() bool { return false }

// undeliveredFor bounds how long Ask tries again a request the session
// could not carry.
const undeliveredFor = 2 * time.Second

// Ask sends the question and waits for the answer. With single JSON
// answers the request travels on the session's GET stream, which a client
// opens only after initialize: a call made at once can find it not yet
// open, and the SDK refuses the write before anything reaches the client.
// Such a request is sent again for up to undeliveredFor; an answer of the
// client's (a JSON-RPC error included) is never asked again.
func (a sessionAsker) Ask(ctx context.Context, q tools.Question) (tools.Decision, error) {
	giveUp := time.Now().Add(undeliveredFor)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		r, err := a.ss.Elicit(ctx, question(q))
		var answered *jsonrpc.Error
		switch {
		case err == nil:
			return decisionOf(r)
		case errors.As(err, &answered) || ctx.Err() != nil || time.Now().After(giveUp):
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(wait):
		}
	}
}

// sealer seals and opens request states with AES-256-GCM.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the elicitation key must be 32 bytes, not %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// requestState is what a sealed state binds: an answer is taken only for
// the same subject, session and arguments, the same change shown, before
// it expires, and once (ID).
type requestState struct {
	ID      string `json:"id"`
	Subject string `json:"sub"`
	Session string `json:"ses"`
	Args    string `json:"args"`
	Shown   string `json:"shown"`
	Expires int64  `json:"exp"` // Unix milliseconds
}

func (s *sealer) seal(st requestState) string {
	plain, _ := json.Marshal(st)
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return stateVersion + base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(sealAdditional)))
}

// open gives the state sealed in text, or false when text was not sealed
// by this key (forged, altered, or not a state at all).
func (s *sealer) open(text string) (requestState, bool) {
	var st requestState
	body, ok := strings.CutPrefix(text, stateVersion)
	if !ok || len(body) > 4096 {
		return st, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return st, false
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(sealAdditional))
	if err != nil || json.Unmarshal(plain, &st) != nil {
		return st, false
	}
	return st, true
}

// argsDigest digests a call's tool and arguments, read as JSON (so the
// same arguments encoded again by the client's retry match; a body that is
// not JSON digests its bytes).
func argsDigest(tool string, raw []byte) string {
	canon := raw
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(append([]byte(tool+"\x00"), canon...))
	return hex.EncodeToString(sum[:])
}

// retryAsker asks with the call's answer and takes the decision from its
// retry: the sessionless revisions.
type retryAsker struct {
	sealer  *sealer
	x       *tools.Executor
	params  *sdk.CallToolParamsRaw
	binding requestState // the call's subject, session and arguments
	// asked is the question to answer the call with (input_required),
	// once Ask returned InputRequired.
	asked *sdk.CallToolResult
}

func (a *retryAsker) Later() bool { return true }

func (a *retryAsker) Ask(_ context.Context, q tools.Question) (tools.Decision, error) {
	if a.params.RequestState == "" {
		return "", a.ask(q)
	}
	st, ok := a.sealer.open(a.params.RequestState)
	switch {
	case !ok:
		return "", refused(reasonForged)
	case time.Now().UnixMilli() >= st.Expires:
		return "", refused(reasonExpired)
	case st.Subject != a.binding.Subject || st.Session != a.binding.Session || st.Args != a.binding.Args:
		return "", refused(reasonOther)
	}
	answer, ok := a.params.InputResponses[inputKey].(*sdk.ElicitResult)
	if !ok {
		return "", refused(reasonNoAnswer)
	}
	switch err := a.x.RedeemAnswer(st.ID, time.UnixMilli(st.Expires)); {
	case errors.Is(err, tools.ErrAnswered):
		return "", refused(reasonReplayed)
	case err != nil:
		return "", refused(reasonStore)
	}
	if st.Shown != q.Shown {
		// The change is no longer the one the user answered (the session
		// read the file again, say): the user is asked about this one.
		return "", a.ask(q)
	}
	return decisionOf(answer)
}

// ask seals a new state for q and holds the input_required answer.
func (a *retryAsker) ask(q tools.Question) error {
	st := a.binding
	id := make([]byte, 16)
	rand.Read(id)
	st.ID, st.Shown, st.Expires = hex.EncodeToString(id), q.Shown, q.Approval.Expires.UnixMilli()
	a.asked = &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{inputKey: question(q)},
		RequestState:  a.sealer.seal(st),
	}
	return &tools.InputRequired{}
}
