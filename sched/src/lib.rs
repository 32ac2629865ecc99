//! Cross-process shared-memory priority arbiter (no OpenCL inside).
