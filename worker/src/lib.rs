//! zkdist worker.
