"""Hermes Agent 0.19's provider names whose service answers OpenAI chat completions: plain data, read
by :mod:`.hermes_config` (the profiles built from it) and :mod:`.keys` (which hosts a vendor's key
variable may go to)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    env_vars: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    key_optional: bool = False
    display: str = ""


# Hermes Agent 0.19's provider names whose service answers OpenAI chat completions, with the variables
# Hermes reads for them (the key first; a ``*_BASE_URL`` one moves the endpoint).
ENDPOINTS: dict[str, Endpoint] = {
    "openrouter": Endpoint(
        "https://openrouter.ai/api/v1",
        ("OPENROUTER_API_KEY", "OPENROUTER_BASE_URL"),
        ("or",),
        display="OpenRouter",
    ),
    "openai": Endpoint(
        "https://api.openai.com/v1", ("OPENAI_API_KEY",), ("openai-api", "openai_api"), display="OpenAI"
    ),
    "nous": Endpoint(
        "https://inference-api.nousresearch.com/v1",
        ("NOUS_API_KEY",),
        ("nous-portal", "nousresearch"),
        display="Nous Portal",
    ),
    "deepseek": Endpoint(
        "https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",), ("deepseek-chat", "deep-seek")
    ),
    "gemini": Endpoint(
        "https://generativelanguage.googleapis.com/v1beta/openai",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        ("google", "google-gemini", "google-ai-studio"),
        display="Google Gemini",
    ),
    "xai": Endpoint("https://api.x.ai/v1", ("XAI_API_KEY",), ("grok", "x-ai", "x.ai"), display="xAI"),
    "zai": Endpoint(
        "https://api.z.ai/api/paas/v4",
        ("GLM_API_KEY", "ZAI_API_KEY", "Z_AI_API_KEY"),
        ("glm", "z-ai", "z.ai", "zhipu"),
        display="Z.AI",
    ),
    "kimi-coding": Endpoint(
        "https://api.moonshot.ai/v1",
        ("KIMI_API_KEY", "KIMI_CODING_API_KEY"),
        ("kimi", "moonshot", "kimi-for-coding"),
        display="Kimi",
    ),
    "kimi-coding-cn": Endpoint(
        "https://api.moonshot.cn/v1", ("KIMI_CN_API_KEY",), ("kimi-cn", "moonshot-cn")
    ),
    "alibaba": Endpoint(
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        ("DASHSCOPE_API_KEY",),
        ("dashscope", "alibaba-cloud", "aliyun", "qwen-dashscope"),
    ),
    "alibaba-coding-plan": Endpoint(
        "https://coding-intl.dashscope.aliyuncs.com/v1",
        ("ALIBABA_CODING_PLAN_API_KEY", "DASHSCOPE_API_KEY", "ALIBABA_CODING_PLAN_BASE_URL"),
        ("alibaba-coding", "alibaba_coding", "dashscope-coding"),
    ),
    "arcee": Endpoint("https://api.arcee.ai/api/v1", ("ARCEEAI_API_KEY",), ("arcee-ai", "arceeai")),
    "azure-foundry": Endpoint(
        "", ("AZURE_FOUNDRY_API_KEY", "AZURE_FOUNDRY_BASE_URL"), ("azure", "azure-ai-foundry", "azure-ai")
    ),
    "deepinfra": Endpoint(
        "https://api.deepinfra.com/v1/openai",
        ("DEEPINFRA_API_KEY", "DEEPINFRA_BASE_URL"),
        ("deep-infra", "deepinfra-ai"),
    ),
    "fireworks": Endpoint(
        "https://api.fireworks.ai/inference/v1", ("FIREWORKS_API_KEY",), ("fireworks-ai", "fw")
    ),
    "gmi": Endpoint(
        "https://api.gmi-serving.com/v1", ("GMI_API_KEY", "GMI_BASE_URL"), ("gmi-cloud", "gmicloud")
    ),
    "huggingface": Endpoint(
        "https://router.huggingface.co/v1", ("HF_TOKEN",), ("hf", "hugging-face", "huggingface-hub")
    ),
    "kilocode": Endpoint(
        "https://api.kilo.ai/api/gateway", ("KILOCODE_API_KEY",), ("kilo", "kilo-code", "kilo-gateway")
    ),
    "novita": Endpoint(
        "https://api.novita.ai/openai/v1", ("NOVITA_API_KEY", "NOVITA_BASE_URL"), ("novita-ai", "novitaai")
    ),
    "nvidia": Endpoint("https://integrate.api.nvidia.com/v1", ("NVIDIA_API_KEY",), ("nvidia-nim", "nim")),
    "ollama-cloud": Endpoint("https://ollama.com/v1", ("OLLAMA_API_KEY",), ("ollama_cloud",)),
    "opencode-zen": Endpoint(
        "https://opencode.ai/zen/v1", ("OPENCODE_ZEN_API_KEY",), ("opencode", "opencode_zen", "zen")
    ),
    "opencode-go": Endpoint(
        "https://opencode.ai/zen/go/v1", ("OPENCODE_GO_API_KEY",), ("opencode_go", "go", "opencode-go-sub")
    ),
    "stepfun": Endpoint(
        "https://api.stepfun.ai/step_plan/v1", ("STEPFUN_API_KEY",), ("step", "stepfun-coding-plan")
    ),
    "tencent-tokenhub": Endpoint(
        "https://tokenhub.tencentmaas.com/v1",
        ("TOKENHUB_API_KEY",),
        ("tencent", "tokenhub", "tencent-cloud", "tencentmaas"),
    ),
    "upstage": Endpoint("https://api.upstage.ai/v1", ("UPSTAGE_API_KEY", "UPSTAGE_BASE_URL"), ("solar",)),
    "xiaomi": Endpoint("https://api.xiaomimimo.com/v1", ("XIAOMI_API_KEY",), ("mimo", "xiaomi-mimo")),
    "lmstudio": Endpoint(
        "http://127.0.0.1:1234/v1",
        ("LM_API_KEY",),
        ("lm-studio", "lm_studio"),
        key_optional=True,
        display="LM Studio",
    ),
}
