"""``providers.base`` for plugins written for Hermes Agent: the kernel's ``ProviderProfile`` and
``OMIT_TEMPERATURE`` (a profile with ``fixed_temperature=OMIT_TEMPERATURE`` sends no temperature)."""

from ...providers.profile import OMIT_TEMPERATURE, ProviderProfile

__all__ = ["OMIT_TEMPERATURE", "ProviderProfile"]
