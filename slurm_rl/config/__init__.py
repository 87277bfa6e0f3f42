"""The cluster spec (a site's JSON: node and GPU types, images, mounts, defaults) and its one-line
errors. Only the login side reads a spec; the job reads what submit resolved from it."""
