package vlc

// Backends register themselves in init; GPU backends are added by files
// under their build tags.
import _ "github.com/vlc-embed/vlc/cpu"
