package handlers

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// The defaults of --upload-min-rate and --upload-rate-window.
const (
	DefaultUploadMinRate    = 1024
	DefaultUploadRateWindow = time.Minute
)

// RegisterFlags binds p to an upload's pace flags (docs/files.md) with
// their defaults, the one place each is written (docs/architecture.md,
// "Where each kind of change goes").
func (p *Pace) RegisterFlags(fl *flag.FlagSet) {
	fl.Int64Var(&p.MinRate, "upload-min-rate", DefaultUploadMinRate, "bytes per second a PUT /files body must bring, counted over each --upload-rate-window; a slower or stalled body gets 408 BODY_TOO_SLOW and nothing is kept, a steady one is never cut for taking long")
	fl.DurationVar(&p.Window, "upload-rate-window", DefaultUploadRateWindow, "the window --upload-min-rate is counted over (at least 1s): a stalled upload is cut within it")
}

// WithDefaults gives each zero field its default.
func (p Pace) WithDefaults() Pace {
	if p.MinRate == 0 {
		p.MinRate = DefaultUploadMinRate
	}
	if p.Window == 0 {
		p.Window = DefaultUploadRateWindow
	}
	return p
}

// Validate refuses a pace no upload can keep, in its flags' words.
func (p Pace) Validate() error {
	switch {
	case p.MinRate <= 0:
		return errors.New("--upload-min-rate must be positive")
	case p.Window <= 0:
		return errors.New("--upload-rate-window must be positive")
	case p.Window < time.Second:
		return fmt.Errorf("--upload-rate-window must be at least 1s, not %v: a shorter window would cut uploads on an ordinary pause of the network", p.Window)
	}
	return nil
}
