"""Pipeline components (chunk → retrieve → fuse → rerank → generate) and their composition."""
