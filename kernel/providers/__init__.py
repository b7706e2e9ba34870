"""Provider slots: model providers, memory, context engines, image and video generation, web search.

Plugins subclass the base classes here and register instances; config.yaml
names the active one of each slot (``model.provider``, ``memory.provider``,
``context.engine``, ``image_gen.provider``).
"""

from .context_engine import ContextEngine
from .image_gen import (
    DEFAULT_ASPECT_RATIO,
    ImageGenProvider,
    error_response,
    resolve_aspect_ratio,
    save_b64_image,
    save_url_image,
    success_response,
)
from .manager import ProviderSelectionError
from .memory import MemoryProvider
from .profile import ProviderProfile
from .registry import (
    ProviderCatalog,
    ProviderLookupError,
    get_provider_profile,
    list_providers,
    register_provider,
)
from .results import ChatResult, ChatTransport, ProviderError, ToolCall, Usage
from .video_gen import VideoGenProvider
from .web_search import WebSearchProvider

__all__ = [
    "DEFAULT_ASPECT_RATIO",
    "ChatResult",
    "ChatTransport",
    "ContextEngine",
    "ImageGenProvider",
    "MemoryProvider",
    "ProviderCatalog",
    "ProviderError",
    "ProviderLookupError",
    "ProviderProfile",
    "ProviderSelectionError",
    "ToolCall",
    "Usage",
    "VideoGenProvider",
    "WebSearchProvider",
    "error_response",
    "get_provider_profile",
    "list_providers",
    "register_provider",
    "resolve_aspect_ratio",
    "save_b64_image",
    "save_url_image",
    "success_response",
]
