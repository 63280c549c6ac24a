// Where an unfinished upload's state is kept, so that it resumes after the app or process was
// killed. The shape is Web Storage's, which React Native's AsyncStorage and MMKV wrappers
// share (they answer promises): pass `localStorage`, `AsyncStorage` or your own.

export interface UploadStorage {
  getItem(key: string): string | null | undefined | Promise<string | null | undefined>;
  setItem(key: string, value: string): void | Promise<void>;
  removeItem(key: string): void | Promise<void>;
}

/** An in-memory store: uploads resume within this process only. */
export function memoryStorage(): UploadStorage {
  const items = new Map<string, string>();
  return {
    getItem: (key) => items.get(key) ?? null,
    setItem: (key, value) => { items.set(key, value); },
    removeItem: (key) => { items.delete(key); },
  };
}

/** What is kept of one upload: the Idempotency-Key (saved before anything is sent, so a
 * process killed before it learns the job replays the same request) and the job's Location. */
export interface UploadRecord {
  idempotencyKey: string;
  location?: string;
}

export async function loadRecord(storage: UploadStorage, key: string): Promise<UploadRecord | null> {
  try {
    const value = JSON.parse((await storage.getItem(key)) ?? "null");
    return value && typeof value.idempotencyKey === "string" ? value : null;
  } catch {
    return null; // unreadable: start afresh
  }
}
