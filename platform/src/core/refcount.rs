//! Retain and release, shared by every kind: the application's calls are mirrored onto
//! the vendor object one for one, so the vendor's reference count reads exactly as it
//! would without the layer; the wrapper itself lives while anything still holds it.

use super::error::CLResult;
use super::handle::{Kind, Obj};

/// "CL_INVALID_<KIND> if <handle> is not a valid <kind>." Then the vendor's retain.
pub fn retain<T: Kind>(h: T::Handle, vendor: impl FnOnce(&T) -> CLResult<()>) -> CLResult<()> {
    let o = Obj::<T>::check(h)?;
    vendor(o.get())?;
    o.app_retain();
    Ok(())
}

/// The vendor's release first (its error wins), then ours, which may free the wrapper.
pub fn release<T: Kind>(h: T::Handle, vendor: impl FnOnce(&T) -> CLResult<()>) -> CLResult<()> {
    let o = Obj::<T>::check(h)?;
    if o.app_refs() == 0 {
        return Err(T::INVALID);
    }
    vendor(o.get())?;
    o.app_release()
}
