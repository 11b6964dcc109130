//! Deterministic demo tools of toolplan (being moved here from toolplan-core).
