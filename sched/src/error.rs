//! The crate's error type. Display is written by hand (no `thiserror`) so the messages
//! can be logged once by the caller and then fall back to pass-through.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while opening a segment or arbitrating.
#[derive(Debug)]
pub enum SchedError {
    /// A system call on the segment file failed.
    Io {
        /// What was being done (e.g. "open", "ftruncate").
        op: &'static str,
        /// The segment path.
        path: PathBuf,
        /// The underlying OS error.
        source: io::Error,
    },
    /// The segment path is a symbolic link; it is never followed.
    Symlink(PathBuf),
    /// The segment path is not a regular file.
    NotRegularFile(PathBuf),
    /// The segment belongs to another user.
    WrongOwner {
        /// The segment path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The uid we expected.
        expected: u32,
    },
    /// A group-shared segment belongs to another group.
    WrongGroup {
        /// The segment path.
        path: PathBuf,
        /// Its group.
        group: u32,
        /// The configured group.
        expected: u32,
    },
    /// The segment's mode lets other users in (world access, or group access without a
    /// configured group).
    BadPermissions {
        /// The segment path.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// The file size does not match what the header says (or is too small for a header).
    WrongSize {
        /// The segment path.
        path: PathBuf,
        /// The size we expected.
        expected: u64,
        /// The size we found.
        actual: u64,
    },
    /// The magic number is not SoftPreempt's.
    BadMagic {
        /// The segment path.
        path: PathBuf,
        /// The value found.
        found: u32,
    },
    /// The layout version is not one this build understands.
    UnsupportedVersion {
        /// The segment path.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The version this build writes.
        supported: u32,
    },
    /// A header field holds a value out of range.
    Corrupt {
        /// The segment path.
        path: PathBuf,
        /// Which field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// The segment was for another device key (a name-hash collision).
    KeyMismatch {
        /// The segment path.
        path: PathBuf,
    },
    /// Another process created the segment but did not publish its header in time.
    NotPublished {
        /// The segment path.
        path: PathBuf,
    },
    /// Every client slot is in use by a live process.
    Full {
        /// Number of slots in the segment.
        slots: u32,
    },
    /// The segment was changed under this process after it was opened (overwritten,
    /// truncated, or this client's slot taken over): arbitration through it has ended.
    Damaged {
        /// The segment path.
        path: PathBuf,
        /// What was found.
        what: &'static str,
    },
    /// A wait for a grant timed out.
    Timeout,
    /// An argument or option was out of range.
    InvalidArgument(String),
}

impl SchedError {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: io::Error) -> Self {
        SchedError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for SchedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedError::Io { op, path, source } => {
                write!(f, "{op} on shared segment {}: {source}", path.display())
            }
            SchedError::Symlink(p) => {
                write!(f, "shared segment {} is a symbolic link; refusing it", p.display())
            }
            SchedError::NotRegularFile(p) => {
                write!(f, "shared segment {} is not a regular file", p.display())
            }
            SchedError::WrongOwner {
                path,
                owner,
                expected,
            } => write!(
                f,
                "shared segment {} is owned by uid {owner}, expected uid {expected}; refusing it",
                path.display()
            ),
            SchedError::WrongGroup {
                path,
                group,
                expected,
            } => write!(
                f,
                "shared segment {} belongs to group {group}, expected group {expected}; refusing it",
                path.display()
            ),
            SchedError::BadPermissions { path, mode } => write!(
                f,
                "shared segment {} has mode {mode:o}, which lets other users in; refusing it",
                path.display()
            ),
            SchedError::WrongSize {
                path,
                expected,
                actual,
            } => write!(
                f,
                "shared segment {} has size {actual}, expected {expected}",
                path.display()
            ),
            SchedError::BadMagic { path, found } => write!(
                f,
                "shared segment {} has magic {found:#010x}, not a SoftPreempt segment",
                path.display()
            ),
            SchedError::UnsupportedVersion {
                path,
                found,
                supported,
            } => write!(
                f,
                "shared segment {} has layout version {found}, this build supports {supported}",
                path.display()
            ),
            SchedError::Corrupt { path, field, value } => write!(
                f,
                "shared segment {} is corrupt: field {field} = {value} is out of range",
                path.display()
            ),
            SchedError::KeyMismatch { path } => write!(
                f,
                "shared segment {} belongs to another device key",
                path.display()
            ),
            SchedError::NotPublished { path } => write!(
                f,
                "shared segment {} was created but its header was never published",
                path.display()
            ),
            SchedError::Full { slots } => {
                write!(f, "all {slots} client slots of the shared segment are in use")
            }
            SchedError::Damaged { path, what } => write!(
                f,
                "shared segment {} was changed by another process while in use ({what}); \
                 arbitration through it has stopped",
                path.display()
            ),
            SchedError::Timeout => write!(f, "timed out waiting for a slice grant"),
            SchedError::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
        }
    }
}

impl std::error::Error for SchedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchedError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
