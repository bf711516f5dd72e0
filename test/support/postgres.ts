/**
 * A real, throw-away Postgres for the cluster tests: Debian's `postgresql` binaries (`initdb`, `pg_ctl`) on
 * PATH or under `/usr/lib/postgresql/<version>/bin`, a cluster initialised in a temporary directory,
 * listening on 127.0.0.1 at a free port (and its socket in that directory), stopped and removed by `stop`.
 *
 * `initdb` refuses to run as root: as root, the server runs as the `postgres` user (made by the Debian
 * package), else `nobody`, on a directory that user owns.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The directory of the Postgres server binaries, if any. */
export const binaries = (): string | undefined => {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir !== "" && existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))) return dir
  }
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : join(root, versions[0], "bin")
}

/** A free TCP port on 127.0.0.1. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()))
    })
  })

/** A running Postgres. */
export interface Postgres {
  /** The URL of a database, made by {@link Postgres.database}. */
  readonly database: (name: string) => string
  /** Stops the server and removes its directory. */
  readonly stop: () => void
}

const userOf = (): string | undefined => {
  if (process.getuid?.() !== 0) return undefined
  for (const user of ["postgres", "nobody"]) {
    try {
      execFileSync("id", ["-u", user], { stdio: "ignore" })
      return user
    } catch {
      // next
    }
  }
  throw new Error("running as root, and neither the postgres nor the nobody user exists to run Postgres as")
}

/** Starts a Postgres from the binaries in `bin` (see the module). */
export const start = async (bin: string): Promise<Postgres> => {
  const user = userOf()
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-pg-"))
  const data = join(dir, "data")
  const as = (command: string, args: ReadonlyArray<string>) =>
    user === undefined
      ? execFileSync(join(bin, command), args, { stdio: "pipe", cwd: dir })
      : execFileSync("runuser", ["-u", user, "--", join(bin, command), ...args], { stdio: "pipe", cwd: dir })
  if (user !== undefined) {
    const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8" }).trim())
    const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8" }).trim())
    chmodSync(dir, 0o700)
    chownSync(dir, uid, gid)
  }
  const port = await freePort()
  let started = false
  const stop = () => {
    try {
      if (started) as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
    } catch {
      // already stopped
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    as("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
    const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`
    as("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "log"), "-w", "-t", "60", "start"])
    started = true
  } catch (error) {
    stop()
    throw error
  }
  return {
    database: (name) => {
      const psql = existsSync(join(bin, "psql")) ? join(bin, "psql") : "psql"
      execFileSync(psql, ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-c", `CREATE DATABASE ${name}`], {
        stdio: "pipe"
      })
      return `postgres://postgres@127.0.0.1:${port}/${name}`
    },
    stop
  }
}
