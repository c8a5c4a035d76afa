#include "settings/savedpasswords.h"

#include "settings/settings.h"

#include <QLoggingCategory>

#include <qt6keychain/keychain.h>

Q_LOGGING_CATEGORY(lcPasswords, "once.ui.passwords")

namespace once::ui {

namespace {

// The keychain's name for the console's entries; each entry's key is a saved URL.
const QString Service = QStringLiteral("once-console");
// A key nothing is saved under: looking it up tells whether the keychain answers at all.
const QString ProbeKey = QStringLiteral("once-console: is a keychain there?");

QString describe(const QKeychain::Job &job)
{
    switch (job.error()) {
    case QKeychain::NoBackendAvailable:
    case QKeychain::NotImplemented:
        return SavedPasswords::tr("no Secret Service (GNOME Keyring, KWallet) is running");
    case QKeychain::AccessDeniedByUser:
        return SavedPasswords::tr("the keychain was not unlocked");
    case QKeychain::NoError:
    case QKeychain::EntryNotFound:
    case QKeychain::CouldNotDeleteEntry:
    case QKeychain::AccessDenied:
    case QKeychain::OtherError:
        break;
    }
    return SavedPasswords::tr("Secret Service: %1").arg(job.errorString());
}

// Jobs have no parent: libsecret calls back into a job when it answers, so a job deleted
// before then (with a window closed early) would be called after its death. Each deletes
// itself once finished; its result reaches this object only while this object lives.
template <typename Job> Job *newJob()
{
    return new Job(Service);
}

} // namespace

SavedPasswords::SavedPasswords(QObject *parent) : QObject(parent)
{
    auto *probe = newJob<QKeychain::ReadPasswordJob>();
    probe->setKey(ProbeKey);
    connect(probe, &QKeychain::Job::finished, this, [this](QKeychain::Job *job) {
        if (job->error() == QKeychain::NoError || job->error() == QKeychain::EntryNotFound) {
            m_keychain = Keychain::Available;
            emit keychainChecked();
        } else {
            noteUnavailable(describe(*job));
        }
    });
    probe->start();
}

SavedPasswords::~SavedPasswords() = default;

bool SavedPasswords::isRemembered(const QString &savedUrl) const
{
    return Settings().rememberedPasswords().contains(savedUrl);
}

void SavedPasswords::noteUnavailable(const QString &reason)
{
    const bool changed = m_keychain != Keychain::Unavailable;
    m_keychain = Keychain::Unavailable;
    m_unavailableReason = reason;
    if (changed) {
        qCInfo(lcPasswords).noquote() << "no keychain:" << reason;
        emit keychainChecked();
    }
}

void SavedPasswords::find(const QString &savedUrl, QObject *context, Found done)
{
    if (m_keychain == Keychain::Unavailable) {
        done(std::nullopt, tr("there is no keychain to look in (%1)").arg(m_unavailableReason));
        return;
    }
    auto *job = newJob<QKeychain::ReadPasswordJob>();
    job->setKey(savedUrl);
    connect(job, &QKeychain::Job::finished, context,
            [this, done = std::move(done)](QKeychain::Job *finished) {
                switch (finished->error()) {
                case QKeychain::NoError:
                    done(static_cast<QKeychain::ReadPasswordJob *>(finished)->textData(), QString());
                    return;
                case QKeychain::EntryNotFound:
                    done(std::nullopt, tr("the keychain holds no password for it"));
                    return;
                case QKeychain::AccessDeniedByUser:
                    done(std::nullopt, describe(*finished));
                    return;
                case QKeychain::CouldNotDeleteEntry:
                case QKeychain::AccessDenied:
                case QKeychain::NoBackendAvailable:
                case QKeychain::NotImplemented:
                case QKeychain::OtherError:
                    break;
                }
                noteUnavailable(describe(*finished));
                done(std::nullopt, tr("there is no keychain to look in (%1)").arg(m_unavailableReason));
            });
    job->start();
}

void SavedPasswords::remember(const QString &savedUrl, const QString &password)
{
    if (m_keychain == Keychain::Unavailable) {
        emit failed(
            tr("The password was not remembered: there is no keychain (%1).").arg(m_unavailableReason));
        return;
    }
    auto *job = newJob<QKeychain::WritePasswordJob>();
    job->setKey(savedUrl);
    job->setTextData(password);
    // QtKeychain could fall back to a plain settings file; it must not (the default, said here).
    job->setInsecureFallback(false);
    connect(job, &QKeychain::Job::finished, this, [this, savedUrl](QKeychain::Job *finished) {
        if (finished->error() != QKeychain::NoError) {
            emit failed(tr("The password was not remembered: %1.").arg(describe(*finished)));
            return;
        }
        Settings().setPasswordRemembered(savedUrl, true);
    });
    job->start();
}

void SavedPasswords::forget(const QString &savedUrl)
{
    Settings().setPasswordRemembered(savedUrl, false);
    if (m_keychain == Keychain::Unavailable)
        return;
    auto *job = newJob<QKeychain::DeletePasswordJob>();
    job->setKey(savedUrl);
    connect(job, &QKeychain::Job::finished, this, [](QKeychain::Job *finished) {
        if (finished->error() != QKeychain::NoError && finished->error() != QKeychain::EntryNotFound)
            qCWarning(lcPasswords).noquote()
                << "cannot remove a password from the keychain:" << finished->errorString();
    });
    job->start();
}

} // namespace once::ui
