package fs

// PrivateDir is the folder directly under the workspace root where the server
// keeps its own files (cross-process lock files, staged temporary files). It
// lives on the shared filesystem so that every process serving the root sees
// it, whatever its $TMPDIR (docs/reliability.md). glob and grep never list
// it, and the file tools do not reach into it.
const PrivateDir = ".toolfs-api"

// TempGlob matches the names of the temporary files a write or edit stages
// before publishing them (".<name>.toolfs-<id>.tmp"). glob and grep never
// list them, wherever they are.
const TempGlob = ".*.toolfs-*.tmp"
