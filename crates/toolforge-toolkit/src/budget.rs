//! The global `run_python` budget: how many snippets run at once and how much memory their
//! children may reserve together (each reserves its address-space limit). A run past either
//! is refused at once with a clear "busy" error rather than queued, so one client cannot stall
//! the others or take the machine's memory.

use std::sync::Arc;

use std::sync::Mutex;

/// Limits shared by every session of one toolkit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonBudget {
    /// Snippets running at once.
    pub max_concurrent: usize,
    /// Address space all running children may reserve together, in bytes.
    pub max_total_memory_bytes: u64,
}

impl Default for PythonBudget {
    fn default() -> Self {
        Self {
            max_concurrent: 4,
            max_total_memory_bytes: 2 * 1024 * 1024 * 1024,
        }
    }
}

/// The budget is spent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run_python is busy: {running} snippets are running ({reserved_mib} MiB of {limit_mib} MiB reserved, at most {max_concurrent} at once); try again in a few seconds"
)]
pub struct Busy {
    pub running: usize,
    pub max_concurrent: usize,
    pub reserved_mib: u64,
    pub limit_mib: u64,
}

#[derive(Debug, Default)]
struct Spent {
    running: usize,
    reserved: u64,
}

/// What is spent of a [`PythonBudget`] (cheap to clone: the state is shared).
#[derive(Debug, Clone)]
pub struct Budget {
    limits: PythonBudget,
    spent: Arc<Mutex<Spent>>,
}

/// One run's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    memory: u64,
    spent: Arc<Mutex<Spent>>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut s = self
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.running = s.running.saturating_sub(1);
        s.reserved = s.reserved.saturating_sub(self.memory);
    }
}

impl Budget {
    #[must_use]
    pub fn new(limits: PythonBudget) -> Self {
        Self {
            limits,
            spent: Arc::default(),
        }
    }

    /// Reserves one run of `memory` bytes.
    ///
    /// # Errors
    /// [`Busy`] when the run would pass either limit.
    pub fn reserve(&self, memory: u64) -> Result<Reservation, Busy> {
        let mut s = self
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fits = s.running < self.limits.max_concurrent
            && s.reserved.saturating_add(memory) <= self.limits.max_total_memory_bytes;
        if !fits {
            return Err(Busy {
                running: s.running,
                max_concurrent: self.limits.max_concurrent,
                reserved_mib: s.reserved / (1024 * 1024),
                limit_mib: self.limits.max_total_memory_bytes / (1024 * 1024),
            });
        }
        s.running += 1;
        s.reserved += memory;
        Ok(Reservation {
            memory,
            spent: self.spent.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn concurrency_is_capped_and_given_back() {
        let b = Budget::new(PythonBudget {
            max_concurrent: 2,
            max_total_memory_bytes: 1024 * MIB,
        });
        let one = b.reserve(10 * MIB).unwrap();
        let _two = b.reserve(10 * MIB).unwrap();
        let busy = b.reserve(10 * MIB).unwrap_err();
        assert_eq!(busy.running, 2);
        assert!(busy.to_string().contains("run_python is busy"), "{busy}");
        drop(one);
        assert!(b.reserve(10 * MIB).is_ok());
    }

    #[test]
    fn memory_is_capped_and_given_back() {
        let b = Budget::new(PythonBudget {
            max_concurrent: 10,
            max_total_memory_bytes: 1024 * MIB,
        });
        let big = b.reserve(768 * MIB).unwrap();
        assert!(b.reserve(512 * MIB).is_err(), "768 + 512 MiB is over 1 GiB");
        let _small = b.reserve(256 * MIB).unwrap();
        drop(big);
        assert!(b.reserve(512 * MIB).is_ok());
    }
}
