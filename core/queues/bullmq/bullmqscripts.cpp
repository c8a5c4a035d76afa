#include "queues/bullmq/bullmqscripts.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>

#include <algorithm>
#include <memory>

namespace once {

namespace {

// The releases whose scripts' KEYS/ARGV contracts once implements, by major.minor.
const QStringList SupportedReleases = {QStringLiteral("6.7")};

QByteArray sha1Hex(const QString &text)
{
    return QCryptographicHash::hash(text.toUtf8(), QCryptographicHash::Sha1).toHex();
}

// A script file while its includes are resolved: its text with each include line
// replaced by the tokens of what it includes, and those files themselves.
struct ScriptFile
{
    QString path;
    QString text;
    QString token; // "@@" and the SHA1 of the path: where the include goes
    QList<ScriptFile *> includes;
};

// What JavaScript's String.prototype.replace(string, string) does: the first occurrence
// only, and the replacement's $-patterns ($$, $&, $`, $') expanded, as BullMQ's loader
// runs on Node. A body holding one of them must come out as BullMQ's does.
QString replaceFirst(const QString &text, const QString &find, const QString &replacement)
{
    const qsizetype at = text.indexOf(find);
    if (at < 0)
        return text;
    QString expanded;
    expanded.reserve(replacement.size());
    for (qsizetype i = 0; i < replacement.size(); ++i) {
        const QChar c = replacement.at(i);
        const QChar next = i + 1 < replacement.size() ? replacement.at(i + 1) : QChar();
        if (c != u'$' || next.isNull()) {
            expanded += c;
            continue;
        }
        if (next == u'$')
            expanded += u'$';
        else if (next == u'&')
            expanded += find;
        else if (next == u'`')
            expanded += text.left(at);
        else if (next == u'\'')
            expanded += text.mid(at + find.size());
        else {
            expanded += c; // not a pattern: the "$" stays, the next character follows
            continue;
        }
        ++i;
    }
    return text.left(at) + expanded + text.mid(at + find.size());
}

class Resolver
{
public:
    // Every include is read once for the whole folder, as BullMQ's loader caches them.
    ScriptFile *command(const QString &path, QString *error)
    {
        QString text;
        if (!read(path, &text, error))
            return nullptr;
        m_commands.push_back(std::make_unique<ScriptFile>(ScriptFile{path, text, tokenFor(path), {}}));
        ScriptFile *file = m_commands.back().get();
        QStringList stack;
        return resolve(file, &stack, error) ? file : nullptr;
    }

    // The body: each include in place of its first token, before what includes it,
    // every later mention dropped; then no blank lines.
    static QString interpolate(const ScriptFile &file, QSet<QString> *emitted)
    {
        QString text = file.text;
        for (const ScriptFile *child : file.includes) {
            const bool already = emitted->contains(child->path);
            const QString body = interpolate(*child, emitted);
            if (!already && !body.isEmpty())
                text = replaceFirst(text, child->token, body);
            text.replace(child->token, QString());
            emitted->insert(child->path);
        }
        return text;
    }

    static QString withoutBlankLines(QString text)
    {
        static const QRegularExpression blankLine(QStringLiteral("^\\s*[\\r\\n]"),
                                                  QRegularExpression::MultilineOption);
        return text.replace(blankLine, QString());
    }

private:
    static QString tokenFor(const QString &path)
    {
        return QStringLiteral("@@") + QString::fromLatin1(sha1Hex(path));
    }

    static bool read(const QString &path, QString *text, QString *error)
    {
        QFile file(path);
        if (!file.open(QIODevice::ReadOnly)) {
            *error = QStringLiteral("cannot read the BullMQ script %1: %2")
                         .arg(QDir::toNativeSeparators(path), file.errorString());
            return false;
        }
        *text = QString::fromUtf8(file.readAll());
        return true;
    }

    bool resolve(ScriptFile *file, QStringList *stack, QString *error)
    {
        if (stack->contains(file->path)) {
            *error = QStringLiteral("BullMQ script %1 includes itself (through %2)")
                         .arg(QDir::toNativeSeparators(file->path), stack->join(QStringLiteral(" -> ")));
            return false;
        }
        stack->append(file->path);
        static const QRegularExpression includeLine(
            QStringLiteral("^[-]{2,3}[ \\t]*@include[ \\t]+([\"'])(.+?)\\1[; \\t\\n]*$"),
            QRegularExpression::MultilineOption);
        for (;;) {
            const QRegularExpressionMatch match = includeLine.match(file->text);
            if (!match.hasMatch())
                break;
            QString reference = match.captured(2);
            if (QFileInfo(reference).suffix().isEmpty())
                reference += QStringLiteral(".lua");
            const QString includePath =
                QDir::cleanPath(QFileInfo(file->path).dir().absoluteFilePath(reference));
            const auto included = [&](const ScriptFile *child) { return child->path == includePath; };
            if (std::any_of(file->includes.cbegin(), file->includes.cend(), included)) {
                *error = QStringLiteral("BullMQ script %1 includes \"%2\" twice")
                             .arg(QDir::toNativeSeparators(file->path), match.captured(2));
                return false;
            }
            ScriptFile *child = m_includes.value(includePath).get();
            if (!child) {
                QString text;
                QString readError;
                if (QFileInfo(includePath).suffix() != QLatin1String("lua") ||
                    !read(includePath, &text, &readError)) {
                    *error = QStringLiteral("BullMQ script %1: include not found: \"%2\"")
                                 .arg(QDir::toNativeSeparators(file->path), match.captured(2));
                    return false;
                }
                auto made =
                    std::make_shared<ScriptFile>(ScriptFile{includePath, text, tokenFor(includePath), {}});
                m_includes.insert(includePath, made);
                child = made.get();
            }
            file->includes.append(child);
            if (!resolve(child, stack, error))
                return false;
            file->text = replaceFirst(file->text, match.captured(0), child->token);
        }
        stack->removeLast();
        return true;
    }

    std::vector<std::unique_ptr<ScriptFile>> m_commands;
    QHash<QString, std::shared_ptr<ScriptFile>> m_includes;
};

} // namespace

QStringList BullMqScripts::supportedVersions()
{
    QStringList versions;
    for (const QString &release : SupportedReleases)
        versions.append(release + QStringLiteral(".x"));
    return versions;
}

QString BullMqScripts::defaultCommandsFolder()
{
    const QString chosen = qEnvironmentVariable("ONCE_BULLMQ_SCRIPTS");
    return QDir::current().absoluteFilePath(
        chosen.isEmpty() ? QStringLiteral("node_modules/bullmq/dist/cjs/commands") : chosen);
}

namespace {
QString &chosenCommandsFolder()
{
    static QString folder;
    return folder;
}
} // namespace

QString BullMqScripts::commandsFolder()
{
    return chosenCommandsFolder().isEmpty() ? defaultCommandsFolder() : chosenCommandsFolder();
}

void BullMqScripts::setCommandsFolder(const QString &folder)
{
    chosenCommandsFolder() = folder;
}

QByteArrayList BullMqScripts::evalsha(const char *name, const QByteArrayList &keysAndArguments) const
{
    const BullMqScript *found = script(QLatin1StringView(name));
    Q_ASSERT(found && keysAndArguments.size() >= found->keyCount);
    return QByteArrayList{"EVALSHA", found->sha1, QByteArray::number(found->keyCount)} + keysAndArguments;
}

std::optional<BullMqScripts> BullMqScripts::load(const QString &commandsFolder, QString *error)
{
    const QDir commands(commandsFolder);
    const QString shown = QDir::toNativeSeparators(commands.absolutePath());
    const QString supported = supportedVersions().join(QStringLiteral(", "));
    QFile package(commands.absoluteFilePath(QStringLiteral("../../../package.json")));
    if (!commands.exists() || !package.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral(
                     "no BullMQ scripts at %1: install bullmq %2 with npm (node_modules/bullmq/dist/cjs/"
                     "commands) or give the folder where they are")
                     .arg(shown, supported);
        return std::nullopt;
    }
    const QJsonObject manifest = QJsonDocument::fromJson(package.readAll()).object();
    const QString version = manifest.value(QStringLiteral("version")).toString();
    if (manifest.value(QStringLiteral("name")).toString() != QLatin1String("bullmq") || version.isEmpty()) {
        *error = QStringLiteral("the scripts at %1 are not BullMQ's: %2 names no bullmq version")
                     .arg(shown, QDir::toNativeSeparators(QFileInfo(package).absoluteFilePath()));
        return std::nullopt;
    }
    const QString release = version.section(u'.', 0, 1);
    if (!SupportedReleases.contains(release) || version.section(u'.', 2).isEmpty()) {
        *error =
            QStringLiteral("BullMQ %1 at %2 is not supported: once runs the scripts of BullMQ %3 only, whose "
                           "contracts it implements")
                .arg(version, shown, supported);
        return std::nullopt;
    }

    BullMqScripts scripts;
    scripts.m_version = version;
    scripts.m_folder = commands.absolutePath();
    Resolver resolver;
    const QStringList files = commands.entryList({QStringLiteral("*.lua")}, QDir::Files, QDir::Name);
    for (const QString &fileName : files) {
        ScriptFile *file = resolver.command(commands.absoluteFilePath(fileName), error);
        if (!file)
            return std::nullopt;
        QSet<QString> emitted;
        BullMqScript script;
        const QString baseName = fileName.chopped(int(qstrlen(".lua")));
        script.name = baseName.section(u'-', 0, 0);
        script.keyCount = baseName.section(u'-', 1, 1).toInt();
        const QString body = Resolver::withoutBlankLines(Resolver::interpolate(*file, &emitted));
        script.lua = body.toUtf8();
        script.sha1 = sha1Hex(body);
        scripts.m_scripts.insert(script.name, script);
    }
    if (scripts.m_scripts.isEmpty()) {
        *error = QStringLiteral("no BullMQ scripts at %1: the folder holds no .lua files").arg(shown);
        return std::nullopt;
    }
    return scripts;
}

const BullMqScript *BullMqScripts::script(const QString &name) const
{
    const auto found = m_scripts.constFind(name);
    return found == m_scripts.cend() ? nullptr : &*found;
}

QStringList BullMqScripts::names() const
{
    QStringList names = m_scripts.keys();
    names.sort();
    return names;
}

} // namespace once
