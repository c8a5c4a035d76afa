#!/usr/bin/env node
'use strict';
// Publishes reminders to a Google Cloud Pub/Sub topic as an ordinary @google-cloud/pubsub
// producer would, for once's broker tests:
//   node publish-pubsub.js --url pubsub://PROJECT/SUBSCRIPTION?topic=TOPIC[&endpoint=HOST:PORT]
//                          --topic TOPIC --count N [--duplicate-every K] [--prefix P]
// Each reminder is one message whose data is the reminder's JSON, without attributes
// (once uses Pub/Sub's messageId then); the client batches them as it does by default.
// endpoint= is an emulator, reached as the client reaches one from PUBSUB_EMULATOR_HOST;
// elsewhere the client's own credentials apply. `once init --queue URL` creates the
// topic; this script only checks that it exists.

const { messages, run } = require('./common');

function parsePubSubUrl(text) {
  const url = new URL(text);
  const subscription = url.pathname.split('/').filter((part) => part.length > 0)[0];
  const topic = url.searchParams.get('topic');
  if (url.protocol !== 'pubsub:' || !url.hostname || !subscription || !topic)
    throw new Error(`not a Pub/Sub queue URL (pubsub://PROJECT/SUBSCRIPTION?topic=TOPIC): ${text}`);
  return { project: url.hostname, topic, endpoint: url.searchParams.get('endpoint') || undefined };
}

async function publish(options) {
  const where = parsePubSubUrl(options.url);
  if (where.topic !== options.target)
    throw new Error(`--topic ${options.target} is not the topic the URL names (${where.topic})`);
  // Read when the client is made, as Google's clients read it.
  if (where.endpoint) process.env.PUBSUB_EMULATOR_HOST = where.endpoint;
  const { PubSub } = require('@google-cloud/pubsub');
  const client = new PubSub({ projectId: where.project });
  try {
    const topic = client.topic(where.topic);
    const [exists] = await topic.exists();
    if (!exists)
      throw new Error(`topic "${where.topic}" not found; create it first with: once init --queue '${options.url}'`);
    const published = [];
    for (const json of messages(options)) published.push(topic.publishMessage({ data: Buffer.from(json) }));
    await Promise.all(published);
  } finally {
    await client.close();
  }
}

run('publish-pubsub.js', 'topic', publish);
