//! Every OpenCL type, constant and the ICD dispatch table, in one import.
pub use opencl_sys::cl_icd::*;
pub use opencl_sys::*;
