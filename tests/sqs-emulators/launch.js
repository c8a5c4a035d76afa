// Runs one Amazon SQS emulator on 127.0.0.1 for the tests; scripts/sqs-server starts and
// stops it:
//
//   node launch.js fauxqs|local-aws-sqs DIR [PORT]
//
// PORT 0 (the default) lets the kernel pick a free port, so no other process can take it
// between a check and the bind. Once the emulator listens, this writes into DIR:
//   sqs.pid   this process (scripts/sqs-server stops only a process whose command line
//             names this file and DIR)
//   endpoint  http://127.0.0.1:PORT, what clients send their requests to
//   account   the account id in the emulator's queue URLs and ARNs
// and prints one line to stdout (scripts/sqs-server sends it to DIR/sqs.log).
//
// Why not the packages' own command lines: fauxqs's CLI and startFauxqs() listen on
// 0.0.0.0, and local-aws-sqs has no CLI. Both keep every queue and message in memory; DIR
// holds only these files and the log. SQS_SERVER_VERBOSE=1 makes fauxqs log every request
// too (a lot of text for a test that sends thousands of messages).
import { writeFileSync, renameSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";

const [emulator, dir, portText = "0"] = process.argv.slice(2);
const port = Number(portText);
if (!["fauxqs", "local-aws-sqs"].includes(emulator) || !dir || !Number.isInteger(port) || port < 0 || port > 65535) {
    console.error("usage: node launch.js fauxqs|local-aws-sqs DIR [PORT]");
    process.exit(2);
}
const host = "127.0.0.1";
const region = "us-east-1";

// Written whole or not at all: scripts/sqs-server new-queue may read them at any time.
function writeAtomically(name, text) {
    const path = join(dir, name);
    writeFileSync(`${path}.tmp`, text, { mode: 0o600 });
    renameSync(`${path}.tmp`, path);
}

// Resolves once the emulator listens; returns { port, account, close }.
async function startFauxqs() {
    const { buildApp } = await import("fauxqs");
    // Not exported by the package: the account id its queue URLs and ARNs carry
    // (000000000000). Read from its own module rather than copied, so a new version that
    // changes it cannot make new-queue print URLs of another account.
    const { DEFAULT_ACCOUNT_ID } = await import(new URL("./common/types.js", import.meta.resolve("fauxqs")));
    // The default queue URL host "localhost" gives http://sqs.us-east-1.localhost:PORT/...
    // (fauxqs's documented form); the region of a queue comes from the SigV4 credential
    // scope of the request that made it, us-east-1 without one.
    const app = buildApp({ logger: process.env.SQS_SERVER_VERBOSE === "1", defaultRegion: region });
    const address = await app.listen({ host, port });
    return { port: Number(new URL(address).port), account: DEFAULT_ACCOUNT_ID, close: () => app.close() };
}

async function startLocalAwsSqs() {
    const { createRequestHandler } = await import("local-aws-sqs");
    // createSqsServer() would do the same, but its hostname is both where it listens and
    // the host of its queue URLs; this way the two are set on purpose. The region is given
    // so that AWS_REGION in the environment cannot change the ARNs. The package's defaults
    // stay otherwise: its account id 123456789012, a RedrivePolicy's dead-letter queue must
    // exist, and a deleted queue's name cannot be used again for 60 s, as in SQS.
    const { service, requestHandler } = createRequestHandler({ port, hostname: host, region });
    // Some malformed requests (a JSON request without X-Amz-Target) make its handler throw
    // outside its own error handling; Node would end the whole process on that unhandled
    // rejection, and every later test would fail for a reason far from its cause. Answered
    // with a 500 and logged instead.
    const server = createServer((request, response) => {
        requestHandler(request, response).catch((error) => {
            console.error(`launch.js: local-aws-sqs failed on ${request.headers["x-amz-target"] ?? "a request without X-Amz-Target"}: ${error?.stack ?? error}`);
            if (!response.headersSent) {
                response.writeHead(500, { "Content-Type": "application/x-amz-json-1.0" });
            }
            response.end(JSON.stringify({ __type: "com.amazonaws.sqs#InternalError", message: `local-aws-sqs failed: ${error}` }));
        });
    });
    await new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, resolve);
    });
    const actualPort = server.address().port;
    service.PORT = actualPort; // its queue URLs carry this port
    return {
        port: actualPort,
        account: service.ACCOUNT_ID,
        close: () =>
            new Promise((resolve) => {
                server.close(resolve);
                server.closeAllConnections(); // long polls would hold close() for 20 s
            }),
    };
}

writeAtomically("sqs.pid", `${process.pid}\n`);
let running;
try {
    running = emulator === "fauxqs" ? await startFauxqs() : await startLocalAwsSqs();
} catch (error) {
    console.error(`launch.js: ${emulator} did not start: ${error?.stack ?? error}`);
    process.exit(1);
}
writeAtomically("account", `${running.account}\n`);
writeAtomically("endpoint", `http://${host}:${running.port}\n`);
console.log(`${emulator} listening on http://${host}:${running.port} (account ${running.account})`);

// scripts/sqs-server stop sends SIGTERM; a second signal, or a close that hangs, ends the
// process anyway.
let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"]) {
    process.on(signal, () => {
        if (stopping) process.exit(1);
        stopping = true;
        setTimeout(() => process.exit(1), 3000).unref();
        Promise.resolve(running.close()).then(
            () => process.exit(0),
            () => process.exit(1),
        );
    });
}
