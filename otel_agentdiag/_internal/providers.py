"""Model providers as libraries spell them, and the GenAI conventions' well-known value for each.

Shared by the convention adapters (a peer's span names its provider in its own words) and by our instrumentations
of libraries that front several providers (a LlamaIndex LLM class is named after its provider's package).
"""

from __future__ import annotations

__all__ = ["PROVIDER_ALIASES", "provider_of_module"]

PROVIDER_ALIASES: dict[str, str] = {
    "openai": "openai",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azureopenai": "azure.ai.openai",
    "anthropic": "anthropic",
    "google": "gcp.gemini",
    "gemini": "gcp.gemini",
    "google_genai": "gcp.gen_ai",
    "vertex_ai": "gcp.vertex_ai",
    "vertexai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "aws_bedrock": "aws.bedrock",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "xai": "x_ai",
    "groq": "groq",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "perplexity": "perplexity",
    "ollama": "ollama",
}
"""A provider as libraries spell it (lower-cased) → the GenAI conventions' well-known value."""


def provider_of_module(module: str, prefix: str) -> str | None:
    """The provider a class's module names after ``prefix`` (``llama_index.llms.openai.base`` with prefix
    ``llama_index.llms.`` → ``openai``), as the conventions spell it; None when the module names none we know."""
    if not module.startswith(prefix):
        return None
    package = module[len(prefix) :].partition(".")[0].lower()
    return PROVIDER_ALIASES.get(package)
