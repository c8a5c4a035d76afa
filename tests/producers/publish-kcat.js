#!/usr/bin/env node
'use strict';
// Publishes reminders to a Kafka topic with kcat (Debian's package), as a team's shell
// tooling would, for once's broker tests:
//   node publish-kcat.js --url kafka://HOST:PORT/TOPIC[?brokers=HOST:PORT,...] --topic NAME
//                        --count N [--duplicate-every K] [--prefix P]
// Node only writes kcat's input: one "USER<TAB>JSON" line per message, keyed by the
// reminder's user like publish-kafka.js, the same bytes again for a duplicate. kcat
// itself speaks to the cluster (librdkafka, acks=all) and says how many it delivered.

const { spawn } = require('node:child_process');
const { messages, run } = require('./common');

function publish(options) {
  const url = new URL(options.url);
  const brokers = [url.host];
  const more = url.searchParams.get('brokers');
  if (more) brokers.push(...more.split(',').filter((b) => b && b !== url.host));
  const lines = [];
  for (const json of messages(options)) lines.push(`${JSON.parse(json).user_id}\t${json}\n`);
  return new Promise((resolve, reject) => {
    const kcat = spawn(
      'kcat',
      ['-P', '-b', brokers.join(','), '-t', options.target, '-K', '\t', '-X', 'acks=all', '-X', 'log_level=3'],
      { stdio: ['pipe', 'ignore', 'pipe'] },
    );
    let said = '';
    kcat.stderr.on('data', (chunk) => (said += chunk));
    kcat.on('error', (err) => reject(new Error(`cannot start kcat (scripts/test installs it): ${err.message}`)));
    kcat.on('close', (code) => {
      // kcat exits 0 when every message was delivered, and names the failures otherwise.
      if (code === 0) resolve();
      else reject(new Error(`kcat exited ${code}: ${said.trim().split('\n').slice(-1)[0] || 'no message'}`));
    });
    kcat.stdin.end(lines.join(''));
  });
}

run('publish-kcat.js', 'topic', publish);
