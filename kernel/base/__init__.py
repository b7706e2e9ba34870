"""The foundation: config and home, environment, bounded YAML and JSON, logging, the comment-keeping
config editor and the config schema. It knows nothing of plugins and imports no pluggy."""
