//! Finding and loading the real vendor drivers, without ever going through the ICD loader
//! (rule 1 of the architecture: `clIcdGetPlatformIDsKHR` runs while the loader is still
//! starting up, so calling back into it would recurse or deadlock).

use super::cl::{cl_icd_dispatch, cl_platform_id, cl_uint};
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};

/// `CL_ICD2_TAG_KHR` (cl_khr_icd 2.0): a vendor whose dispatch table carries this value in
/// the `clGetPlatformIDs` and `clUnloadCompiler` slots must be called through
/// `clIcdGetFunctionAddressForPlatformKHR` instead of the object's table.
const ICD2_TAG: isize = 0x4F50_454E_434C_3331;

type GetPlatformIds = unsafe extern "C" fn(cl_uint, *mut cl_platform_id, *mut cl_uint) -> i32;
type GetFnAddr = unsafe extern "C" fn(*const libc::c_char) -> *mut c_void;
type GetFnAddrForPlatform =
    unsafe extern "C" fn(cl_platform_id, *const libc::c_char) -> *mut c_void;

/// One vendor platform found in a vendor library.
pub struct VendorPlatform {
    pub library: PathBuf,
    pub inner: cl_platform_id,
    /// Table used to call this platform's objects when the vendor speaks cl_khr_icd 2.0;
    /// `None` for 1.x vendors, which are called through each inner object's own table.
    pub icd2_table: Option<&'static cl_icd_dispatch>,
}

// SAFETY: the platform handle is an opaque vendor pointer that OpenCL allows on any thread.
unsafe impl Send for VendorPlatform {}
// SAFETY: as above; it is never mutated.
unsafe impl Sync for VendorPlatform {}

/// The candidate vendor libraries, in the order the loader itself would see them.
fn candidates() -> (Vec<String>, String) {
    let cfg = &crate::config::config().vendors;
    if !cfg.is_empty() {
        let libs = cfg
            .iter()
            .filter_map(|p| library_of_entry(Path::new(p)))
            .collect();
        return (libs, "the configured vendor list".into());
    }
    // ocl-icd loads exactly the libraries of OCL_ICD_FILENAMES when it is set, ignoring the
    // vendors directory; the layer mirrors the loader so it wraps what the loader shows.
    if let Some(files) = icd_filenames() {
        let libs = std::env::split_paths(&files)
            .filter_map(|p| library_of_entry(&p))
            .collect();
        return (libs, "OCL_ICD_FILENAMES".into());
    }
    let dir = std::env::var_os("OCL_ICD_VENDORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/OpenCL/vendors"));
    let mut libs = Vec::new();
    if dir.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|e| e == "icd"));
        files.sort();
        libs.extend(files.iter().filter_map(|p| library_of_entry(p)));
    } else if let Some(lib) = library_of_entry(&dir) {
        libs.push(lib);
    }
    (libs, dir.display().to_string())
}

/// `OCL_ICD_FILENAMES`, whole. The Khronos loader (NVIDIA's CUDA `libOpenCL` is one)
/// tokenises this variable in place with `strtok` while it loads the libraries, so while it
/// is calling us the value reads cut at the first ':' (each ':' became a NUL). The bytes
/// after the cut are still there: in `/proc/self/environ` they follow as NUL-separated
/// pieces without a '='. Rejoining them gives the list the loader is working through.
fn icd_filenames() -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let now = std::env::var_os("OCL_ICD_FILENAMES").filter(|f| !f.is_empty())?;
    let Ok(env) = std::fs::read("/proc/self/environ") else {
        return Some(now);
    };
    let mut pieces = env.split(|&b| b == 0);
    let Some(first) = pieces.find_map(|kv| kv.strip_prefix(b"OCL_ICD_FILENAMES=")) else {
        return Some(now); // set at run time, not inherited: nothing was cut
    };
    if first != now.as_encoded_bytes() {
        return Some(now);
    }
    let mut full = first.to_vec();
    for tail in pieces.take_while(|p| !p.is_empty() && !p.contains(&b'=')) {
        full.push(b':');
        full.extend_from_slice(tail);
    }
    Some(std::ffi::OsString::from_vec(full))
}

/// An `.icd` file names its library on its first line; anything else is a library path.
fn library_of_entry(p: &Path) -> Option<String> {
    if p.extension().is_some_and(|e| e == "icd") {
        if p.file_name().is_some_and(|n| n == "softpreempt.icd") {
            return None;
        }
        let text = std::fs::read_to_string(p).ok()?;
        let line = text.lines().next()?.trim();
        (!line.is_empty()).then(|| line.to_string())
    } else {
        Some(p.to_string_lossy().into_owned())
    }
}

/// The path of this library, to skip our own entry wherever it is registered.
fn own_library() -> Option<PathBuf> {
    // SAFETY: dladdr only reads loader metadata for an address inside this library; a zero
    // Dl_info is a valid initial value.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        let addr = own_library as *const () as *const c_void;
        if libc::dladdr(addr, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let p = PathBuf::from(
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        );
        std::fs::canonicalize(&p).ok().or(Some(p))
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated string.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Loads every vendor and returns its platforms. Errors are logged once each and the
/// vendor is skipped, so one broken driver never hides the others.
pub fn discover() -> Vec<VendorPlatform> {
    let (libs, source) = candidates();
    tracing::debug!("softpreempt: vendor candidates from {source}: {libs:?}");
    let own = own_library();
    let mut out = Vec::new();
    for lib in libs {
        match load(&lib, own.as_deref()) {
            Ok(mut v) => out.append(&mut v),
            Err(e) => tracing::error!("softpreempt: vendor '{lib}' skipped: {e}"),
        }
    }
    if out.is_empty() {
        tracing::error!(
            "softpreempt: no vendor OpenCL platform found in {source}; \
             SoftPreempt exposes no platform"
        );
    } else {
        tracing::info!(
            "softpreempt: wrapping {} vendor platform(s) from {source}",
            out.len()
        );
    }
    out
}

fn load(lib: &str, own: Option<&Path>) -> Result<Vec<VendorPlatform>, String> {
    let resolved = std::fs::canonicalize(lib).ok();
    if let (Some(r), Some(o)) = (&resolved, own) {
        if r == o {
            tracing::debug!("softpreempt: '{lib}' is this library; skipped");
            return Ok(Vec::new());
        }
    }
    let c = CString::new(lib).map_err(|_| "path contains a NUL byte".to_string())?;
    // SAFETY: dlopen with a valid C string; RTLD_LOCAL keeps the vendor's symbols out of
    // the global namespace (and so out of the application's way).
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!("cannot load: {}", dl_error()));
    }
    // A library that resolves to ourselves (e.g. a symlink) or to an ICD loader would send
    // us back through the loader: refuse both.
    // SAFETY: dlsym on a live handle with NUL-terminated names.
    let (icd_get, get_addr, is_loader, is_us) = unsafe {
        (
            libc::dlsym(handle, c"clIcdGetPlatformIDsKHR".as_ptr()),
            libc::dlsym(handle, c"clGetExtensionFunctionAddress".as_ptr()),
            !libc::dlsym(handle, c"clGetICDLoaderInfoOCLICD".as_ptr()).is_null()
                || !libc::dlsym(handle, c"clGetICDLoaderInfo".as_ptr()).is_null(),
            libc::dlsym(handle, c"clIcdGetPlatformIDsKHR".as_ptr())
                == crate::core::platform::own_icd_entry(),
        )
    };
    if is_us {
        tracing::debug!("softpreempt: '{lib}' resolves to this library; skipped");
        return Ok(Vec::new());
    }
    if is_loader {
        return Err("this is an ICD loader, not a vendor driver".into());
    }
    let mut get_ids: Option<GetPlatformIds> = None;
    if !icd_get.is_null() {
        // SAFETY: the symbol has the cl_khr_icd signature by specification.
        get_ids = Some(unsafe { std::mem::transmute::<*mut c_void, GetPlatformIds>(icd_get) });
    } else if !get_addr.is_null() {
        // SAFETY: as above, for clGetExtensionFunctionAddress.
        let f = unsafe { std::mem::transmute::<*mut c_void, GetFnAddr>(get_addr) };
        // SAFETY: calling the vendor's own lookup with a constant name.
        let p = unsafe { f(c"clIcdGetPlatformIDsKHR".as_ptr()) };
        if !p.is_null() {
            // SAFETY: the returned function has the cl_khr_icd signature.
            get_ids = Some(unsafe { std::mem::transmute::<*mut c_void, GetPlatformIds>(p) });
        }
    }
    let get_ids = get_ids.ok_or("it has no clIcdGetPlatformIDsKHR (not an ICD driver)")?;
    let mut n: cl_uint = 0;
    // SAFETY: the two-call pattern of clIcdGetPlatformIDsKHR with valid out pointers.
    let rc = unsafe { get_ids(0, std::ptr::null_mut(), &mut n) };
    if rc != 0 || n == 0 {
        return Err(format!(
            "clIcdGetPlatformIDsKHR reported no platform (status {rc})"
        ));
    }
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `ids` has room for `n` handles.
    let rc = unsafe { get_ids(n, ids.as_mut_ptr(), std::ptr::null_mut()) };
    if rc != 0 {
        return Err(format!("clIcdGetPlatformIDsKHR failed with status {rc}"));
    }
    tracing::debug!("softpreempt: '{lib}' has {n} platform(s)");
    let mut out = Vec::new();
    for p in ids.into_iter().filter(|p| !p.is_null()) {
        // SAFETY: every ICD object begins with a pointer to its dispatch table.
        let table = unsafe { *(p as *const *const cl_icd_dispatch) };
        if table.is_null() {
            return Err("a platform has no dispatch table".into());
        }
        let words = table as *const isize;
        // SAFETY: every cl_khr_icd table has at least the 32 slots of OpenCL 1.0 (slot 31 is
        // clUnloadCompiler), so both reads are inside it.
        let icd2 = unsafe { *words == ICD2_TAG && *words.add(31) == ICD2_TAG };
        let icd2_table = if icd2 {
            Some(icd2_table(handle, p)?)
        } else {
            None
        };
        out.push(VendorPlatform {
            library: PathBuf::from(lib),
            inner: p,
            icd2_table,
        });
    }
    Ok(out)
}

/// Builds a full table for a cl_khr_icd 2.0 platform from its
/// `clIcdGetFunctionAddressForPlatformKHR`.
fn icd2_table(
    handle: *mut c_void,
    platform: cl_platform_id,
) -> Result<&'static cl_icd_dispatch, String> {
    // SAFETY: dlsym on a live handle.
    let sym = unsafe { libc::dlsym(handle, c"clIcdGetFunctionAddressForPlatformKHR".as_ptr()) };
    if sym.is_null() {
        return Err("cl_khr_icd 2.0 tags but no clIcdGetFunctionAddressForPlatformKHR".into());
    }
    // SAFETY: the symbol has this signature by the cl_khr_icd 2.0 specification.
    let get = unsafe { std::mem::transmute::<*mut c_void, GetFnAddrForPlatform>(sym) };
    // SAFETY: an all-NULL table is valid (every slot is an Option of a function pointer).
    let mut table: cl_icd_dispatch = unsafe { std::mem::zeroed() };
    let words = &mut table as *mut cl_icd_dispatch as *mut *mut c_void;
    for (name, offset) in crate::core::platform::slot_names() {
        let Ok(cname) = CString::new(*name) else {
            continue;
        };
        // SAFETY: calling the vendor's lookup; the result is a function of that slot's
        // type or NULL, and `offset` is a field offset inside `table`.
        unsafe {
            let f = get(platform, cname.as_ptr());
            *words.byte_add(*offset) = f;
        }
    }
    Ok(Box::leak(Box::new(table)))
}
