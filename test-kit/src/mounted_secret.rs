//! A directory laid out exactly as the kubelet mounts a Secret, so rotation
//! tests see what a pod sees: the data in a timestamped directory
//! (`..2026_11_26_05_58_20.1`), `..data` a symlink to it, each visible
//! file a symlink through `..data` (`tls.crt -> ..data/tls.crt`), and an
//! update swapping `..data` atomically (a new directory, a temporary
//! symlink renamed over `..data`, the old directory removed).

use std::path::{Path, PathBuf};

/// One mounted Secret.
#[derive(Debug)]
pub struct MountedSecret {
    dir: PathBuf,
    generation: u32,
    current: Option<PathBuf>,
}

impl MountedSecret {
    /// Mounts `files` (name, content) in `dir` (created if absent).
    pub fn new(dir: &Path, files: &[(&str, &[u8])]) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut s = MountedSecret {
            dir: dir.to_owned(),
            generation: 0,
            current: None,
        };
        s.swap(files)?;
        Ok(s)
    }

    /// The visible path of `name` (`dir/name`, a symlink through `..data`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Replaces the whole content atomically, as the kubelet does.
    pub fn swap(&mut self, files: &[(&str, &[u8])]) -> std::io::Result<()> {
        self.generation += 1;
        let stamp = jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S");
        let data = format!("..{stamp}.{}", self.generation);
        let data_dir = self.dir.join(&data);
        std::fs::create_dir(&data_dir)?;
        for (name, content) in files {
            std::fs::write(data_dir.join(name), content)?;
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&data, &tmp)?;
        std::fs::rename(&tmp, self.dir.join("..data"))?;
        for (name, _) in files {
            let visible = self.dir.join(name);
            if std::fs::symlink_metadata(&visible).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(name), &visible)?;
            }
        }
        if let Some(old) = self.current.replace(data_dir) {
            std::fs::remove_dir_all(old)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_like_the_kubelet() {
        let dir = std::env::temp_dir().join(format!("gwhub-mounted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = MountedSecret::new(&dir, &[("tls.crt", b"one")]).unwrap();
        let visible = s.path("tls.crt");
        assert_eq!(
            std::fs::read_link(&visible).unwrap(),
            Path::new("..data/tls.crt")
        );
        assert_eq!(std::fs::read(&visible).unwrap(), b"one");
        s.swap(&[("tls.crt", b"two")]).unwrap();
        assert_eq!(std::fs::read(&visible).unwrap(), b"two");
        let dirs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().unwrap().is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "the old data directory is removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
