MARKER = "v1"
