//! Everything a model reads to write a plan (being moved here from toolplan-core).
