// BullMQ's Lua scripts as once loads them from a team's npm installation: the bodies,
// includes resolved, are BullMQ's own to the byte (so Redis's script cache is shared with
// Node workers), and a release whose contracts once does not implement is refused by name.
#include "queues/bullmq/bullmqscripts.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace once;

namespace {

// The bullmq package that scripts/test installs with the test producers (its lockfile
// pins 6.7.0).
QString installedPackage()
{
    return qEnvironmentVariable("ONCE_TEST_PRODUCERS") + QStringLiteral("/node_modules/bullmq");
}

bool write(const QString &path, const QByteArray &content)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile file(path);
    return file.open(QIODevice::WriteOnly) && file.write(content) == content.size();
}

// A package folder with this package.json and these files under dist/cjs/commands;
// returns the commands folder.
QString makePackage(const QTemporaryDir &dir, const QByteArray &manifest,
                    const QHash<QString, QByteArray> &files)
{
    const QString root = dir.filePath(QStringLiteral("node_modules/bullmq"));
    write(root + QStringLiteral("/package.json"), manifest);
    const QString commands = root + QStringLiteral("/dist/cjs/commands");
    QDir().mkpath(commands);
    for (auto it = files.cbegin(); it != files.cend(); ++it)
        write(commands + u'/' + it.key(), it.value());
    return commands;
}

const QByteArray Release = R"({"name": "bullmq", "version": "6.7.0"})";

} // namespace

class TestBullMqScripts : public QObject
{
    Q_OBJECT

private slots:
    void everyScriptIsBullMqsOwnToTheByte();
    void includesGoInOnceBeforeWhatUsesThem();
    void anotherReleaseIsRefusedByName();
    void whatIsMissingIsSaid();
};

void TestBullMqScripts::everyScriptIsBullMqsOwnToTheByte()
{
    const QString package = installedPackage();
    QVERIFY2(QFile::exists(package + QStringLiteral("/package.json")),
             qPrintable(package + QStringLiteral(" is missing: scripts/test installs it (tests/producers)")));
    QString error;
    const auto scripts = BullMqScripts::load(package + QStringLiteral("/dist/cjs/commands"), &error);
    QVERIFY2(scripts, qPrintable(error));
    QCOMPARE(scripts->version(), QStringLiteral("6.7.0"));

    // What BullMQ's Node client sends, from the bodies its build generated.
    QProcess node;
    node.setWorkingDirectory(qEnvironmentVariable("ONCE_TEST_PRODUCERS"));
    node.start(QStringLiteral("node"), {QStringLiteral("bullmq-scripts.js")});
    QVERIFY2(node.waitForFinished(60000), qPrintable(node.errorString()));
    QVERIFY2(node.exitCode() == 0, node.readAllStandardError().constData());
    const QJsonObject bodies = QJsonDocument::fromJson(node.readAllStandardOutput()).object();
    QVERIFY(bodies.size() > 40);

    QCOMPARE(scripts->names().size(), bodies.size());
    for (auto it = bodies.constBegin(); it != bodies.constEnd(); ++it) {
        const QString name = it.key().section(u'-', 0, 0);
        const BullMqScript *script = scripts->script(name);
        QVERIFY2(script, qPrintable(it.key()));
        QCOMPARE(QStringLiteral("%1-%2").arg(script->name).arg(script->keyCount), it.key());
        const QByteArray expected = it.value().toString().toUtf8();
        if (script->lua != expected) {
            // Where they part, to say more than "differ".
            qsizetype at = 0;
            while (at < expected.size() && at < script->lua.size() && expected.at(at) == script->lua.at(at))
                ++at;
            QFAIL(qPrintable(QStringLiteral("%1 differs from byte %2: once has \"%3\", BullMQ \"%4\"")
                                 .arg(it.key())
                                 .arg(at)
                                 .arg(QString::fromUtf8(script->lua.mid(at, 60)),
                                      QString::fromUtf8(expected.mid(at, 60)))));
        }
        QCOMPARE(script->sha1, QCryptographicHash::hash(expected, QCryptographicHash::Sha1).toHex());
    }
    // The scripts once will run are there, with the number of keys it passes them.
    QCOMPARE(scripts->script(QStringLiteral("moveToActive"))->keyCount, 11);
    QCOMPARE(scripts->script(QStringLiteral("moveToFinished"))->keyCount, 14);
    QCOMPARE(scripts->script(QStringLiteral("extendLock"))->keyCount, 2);
}

void TestBullMqScripts::includesGoInOnceBeforeWhatUsesThem()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    // b includes a; the command includes a and b (a twice, once through b): a goes in
    // where the command first names it, once. Blank lines go. A "$$" in an include
    // becomes "$", as Node's String.replace() makes it in BullMQ's own loader.
    const QString commands = makePackage(
        dir, Release,
        {{QStringLiteral("run-2.lua"),
          "-- run\n--- @include \"includes/a\"\n\n--- @include 'includes/b.lua';\nreturn b()\n"},
         {QStringLiteral("includes/a.lua"), "local function a() return '$$' end\n\n"},
         {QStringLiteral("includes/b.lua"), "--- @include \"a\"\n  \nlocal function b() return a() end\n"}});
    QString error;
    const auto scripts = BullMqScripts::load(commands, &error);
    QVERIFY2(scripts, qPrintable(error));
    const BullMqScript *run = scripts->script(QStringLiteral("run"));
    QVERIFY(run);
    QCOMPARE(run->keyCount, 2);
    QCOMPARE(QString::fromUtf8(run->lua), QStringLiteral("-- run\nlocal function a() return '$' end\n"
                                                         "local function b() return a() end\nreturn b()\n"));
    QCOMPARE(run->sha1, QCryptographicHash::hash(run->lua, QCryptographicHash::Sha1).toHex());
}

void TestBullMqScripts::anotherReleaseIsRefusedByName()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QHash<QString, QByteArray> files{{QStringLiteral("extendLock-2.lua"), "return 1\n"}};
    QString error;
    QVERIFY(
        !BullMqScripts::load(makePackage(dir, R"({"name": "bullmq", "version": "6.6.2"})", files), &error));
    QVERIFY2(error.contains(QLatin1String("BullMQ 6.6.2")) &&
                 error.contains(QLatin1String("not supported")) && error.contains(QLatin1String("6.7.x")),
             qPrintable(error));
    QVERIFY2(!error.contains(u'\n'), qPrintable(error));
    QVERIFY(
        !BullMqScripts::load(makePackage(dir, R"({"name": "bullmq", "version": "7.0.0"})", files), &error));
    QVERIFY2(error.contains(QLatin1String("BullMQ 7.0.0")), qPrintable(error));
    QVERIFY(!BullMqScripts::load(makePackage(dir, R"({"name": "bull", "version": "6.7.0"})", files), &error));
    QVERIFY2(error.contains(QLatin1String("not BullMQ's")), qPrintable(error));
    // Any patch release of 6.7 is the same contracts.
    const auto patched =
        BullMqScripts::load(makePackage(dir, R"({"name": "bullmq", "version": "6.7.4"})", files), &error);
    QVERIFY2(patched, qPrintable(error));
    QCOMPARE(patched->version(), QStringLiteral("6.7.4"));
    QCOMPARE(patched->script(QStringLiteral("extendLock"))->lua, QByteArray("return 1\n"));
}

void TestBullMqScripts::whatIsMissingIsSaid()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QString error;
    QVERIFY(!BullMqScripts::load(dir.filePath(QStringLiteral("nowhere/dist/cjs/commands")), &error));
    QVERIFY2(error.contains(QLatin1String("no BullMQ scripts at")) &&
                 error.contains(QLatin1String("nowhere")),
             qPrintable(error));

    QVERIFY(!BullMqScripts::load(
        makePackage(dir, Release,
                    {{QStringLiteral("run-1.lua"), "--- @include \"includes/gone\"\nreturn 1\n"}}),
        &error));
    QVERIFY2(error.contains(QLatin1String("run-1.lua")) &&
                 error.contains(QLatin1String("include not found: \"includes/gone\"")),
             qPrintable(error));

    QTemporaryDir loop;
    QVERIFY(!BullMqScripts::load(
        makePackage(loop, Release,
                    {{QStringLiteral("run-1.lua"), "--- @include \"includes/a\"\nreturn 1\n"},
                     {QStringLiteral("includes/a.lua"), "--- @include \"b\"\n"},
                     {QStringLiteral("includes/b.lua"), "--- @include \"a\"\n"}}),
        &error));
    QVERIFY2(error.contains(QLatin1String("includes itself")), qPrintable(error));
}

QTEST_GUILESS_MAIN(TestBullMqScripts)
#include "tst_bullmqscripts.moc"
