package fs

// Root is the workspace root as every Display path starts with it.
func (l *Local) Root() string { return l.rootAbs }
