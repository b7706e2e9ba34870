"""The loader: discovery of plugin candidates, manifests, and the import and ``register()`` of each plugin."""
