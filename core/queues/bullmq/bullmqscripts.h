#pragma once

#include <QByteArray>
#include <QHash>
#include <QString>
#include <QStringList>

#include <optional>

namespace once {

// One of BullMQ's Lua scripts, as BullMQ itself sends it to Redis.
struct BullMqScript
{
    QString name;     // "moveToActive"
    int keyCount = 0; // how many of its arguments are KEYS (the file's "-11")
    QByteArray lua;   // the body, its includes resolved
    QByteArray sha1;  // hex, what EVALSHA names it by
};

// BullMQ's scripts, loaded from a team's own installation of the npm package
// (node_modules/bullmq/dist/cjs/commands) rather than copied into once: each transition
// of a job is one of them, and their KEYS/ARGV contracts change between releases, so
// once runs exactly the release it was written against, or nothing.
//
// Each command file `<name>-<keys>.lua` may include others (`--- @include "includes/x"`).
// They are resolved the way BullMQ's own loader resolves them: every include once, in
// place of its first mention and before what includes it, then blank lines dropped. The
// bodies, and so their SHA1s, are BullMQ's own to the byte, so once and Node workers
// share Redis's script cache and a script one loaded the other runs.
class BullMqScripts
{
public:
    // The releases whose contracts once implements, as "6.7.x".
    static QStringList supportedVersions();
    // The default place: $ONCE_BULLMQ_SCRIPTS, else the current folder's node_modules.
    static QString defaultCommandsFolder();
    // Where this process loads them from: the folder an operator gave (once's
    // --bullmq-scripts), else the default. Set once at start, before any queue opens.
    static QString commandsFolder();
    static void setCommandsFolder(const QString &folder);

    // Reads the package's version from its package.json (three folders above
    // `commandsFolder`), refuses a release once does not implement, then loads and
    // resolves every command. On failure, nullopt and a one-line *error.
    static std::optional<BullMqScripts> load(const QString &commandsFolder, QString *error);

    QString version() const { return m_version; }
    QString folder() const { return m_folder; }
    // The command of that name, or null.
    const BullMqScript *script(const QString &name) const;
    // EVALSHA of the command of that name (one once loads), with its keys and arguments.
    QByteArrayList evalsha(const char *name, const QByteArrayList &keysAndArguments) const;
    QStringList names() const;

private:
    QString m_version;
    QString m_folder;
    QHash<QString, BullMqScript> m_scripts;
};

} // namespace once
