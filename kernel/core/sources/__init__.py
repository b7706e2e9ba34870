"""Where plugins are found (directories, entry points) and what their files declare (plugin.yaml)."""
