"""The language server editors start (`medallion lsp`): see README.md."""
