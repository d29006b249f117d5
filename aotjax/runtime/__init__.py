"""The runtime: the call boundary that restores eager semantics, and the guards compiled programs are
cached on."""
