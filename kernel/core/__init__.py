"""The microkernel: plugin records, manifests, discovery, config and home, the hook engine,
the ``PluginContext`` base, logging and the ``Kernel`` lifecycle.  It imports no service."""
