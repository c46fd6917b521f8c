"""The data keys behind crypto-shredding, as the SDK and the workers open them
(docs/forgetting.md)."""
