"""``providers.base`` for plugins written for Hermes Agent: the kernel's ``ProviderProfile``."""

from ...providers.profile import ProviderProfile

__all__ = ["ProviderProfile"]
