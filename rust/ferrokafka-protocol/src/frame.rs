//! (filled by the codec work)
