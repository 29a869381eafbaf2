//! waitroom-layer
