#include "dialogs/redrivedialog.h"

#include "dialogs/decisiondialog.h"
#include "display/humanunits.h"

#include <QCheckBox>
#include <QDateTime>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMap>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStyle>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace once::ui {

namespace {

QString durationText(qint64 seconds)
{
    if (seconds < 60)
        return seconds <= 1 ? RedriveDialog::tr("1 second") : RedriveDialog::tr("%1 seconds").arg(seconds);
    if (seconds < 3600)
        return RedriveDialog::tr("%1 min %2 s").arg(seconds / 60).arg(seconds % 60);
    return RedriveDialog::tr("%1 h %2 min").arg(seconds / 3600).arg(seconds % 3600 / 60);
}

QLabel *wrappingLabel(const QString &text = QString())
{
    auto *label = new QLabel(text);
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return label;
}

} // namespace

RedriveSelection RedriveSelection::of(const QList<DeadLetter> &letters, qint64 windowStartMs)
{
    RedriveSelection preview;
    preview.count = letters.size();
    for (const DeadLetter &letter : letters) {
        if (letter.redriveCount > 0)
            ++preview.redrivenBefore;
        // Never sent (an invalid message): no key at the partner to forget.
        if (letter.firstAttemptAtMs > 0 && letter.firstAttemptAtMs < windowStartMs)
            ++preview.outsideWindow;
        ++preview.byClass[letter.errorClass];
        if (diedOfRefusedCredentials(letter))
            ++preview.credentialsRefused;
    }
    preview.sample = letters.mid(0, RedriveDialog::SampleSize);
    return preview;
}

RedriveSelection RedriveSelection::of(const DeadLetterCounts &counts, const QString &errorClass,
                                  const QList<DeadLetter> &sample)
{
    RedriveSelection preview;
    const DeadLetterTally tally = counts.tally(errorClass);
    preview.count = tally.letters;
    preview.redrivenBefore = tally.redrivenBefore;
    preview.outsideWindow = tally.firstSentBefore;
    preview.credentialsRefused = tally.credentialsRefused;
    for (auto it = counts.byClass.cbegin(); it != counts.byClass.cend(); ++it) {
        if (errorClass.isEmpty() || it.key() == errorClass)
            preview.byClass.insert(it.key(), it->letters);
    }
    preview.sample = sample.mid(0, RedriveDialog::SampleSize);
    return preview;
}

RedriveDialog::RedriveDialog(const QList<DeadLetter> &letters, const QString &auditDetail,
                             int idempotencyWindowHours, int defaultRatePerSecond, QWidget *parent)
    : QDialog(parent), m_letters(letters),
      m_preview(RedriveSelection::of(letters, QDateTime::currentMSecsSinceEpoch() -
                                                qint64(idempotencyWindowHours) * 3600 * 1000)),
      m_auditDetail(auditDetail)
{
    buildUi(idempotencyWindowHours, defaultRatePerSecond);
}

RedriveDialog::RedriveDialog(const RedriveSelection &preview, const QString &auditDetail,
                             int idempotencyWindowHours, int defaultRatePerSecond, QWidget *parent)
    : QDialog(parent), m_preview(preview), m_auditDetail(auditDetail)
{
    buildUi(idempotencyWindowHours, defaultRatePerSecond);
}

void RedriveDialog::buildUi(int idempotencyWindowHours, int defaultRatePerSecond)
{
    setWindowTitle(tr("Redrive dead letters"));
    const QMap<QString, qint64> &classes = m_preview.byClass;
    const int redrivenBefore = redrivenBeforeCount();
    const int outsideWindow = outsideIdempotencyWindowCount();
    const QLocale locale;
    const int count = letterCount();

    m_headline =
        new QLabel(count == 0   ? tr("Nothing to redrive.")
                   : count == 1 ? tr("Put 1 dead letter back on the queue?")
                                : tr("Put %1 dead letters back on the queue?").arg(locale.toString(count)));
    m_headline->setObjectName(QStringLiteral("headline"));
    m_headline->setWordWrap(true);
    QFont bold = m_headline->font();
    bold.setBold(true);
    bold.setPointSizeF(bold.pointSizeF() * 1.15);
    m_headline->setFont(bold);

    auto *explanation = wrappingLabel(tr("Each goes back on the queue unchanged (same payload, same send "
                                         "key) with a fresh attempt budget, and "
                                         "is sent with the same Idempotency-Key: a partner that still "
                                         "remembers a key does not act on it twice."));

    QStringList classText;
    for (auto it = classes.cbegin(); it != classes.cend(); ++it)
        classText << QStringLiteral("%1 %2").arg(it.key().isEmpty() ? tr("(none)") : it.key(),
                                                 locale.toString(it.value()));

    auto *facts = new QFormLayout;
    m_facts = facts;
    m_queue = wrappingLabel();
    m_queue->setObjectName(QStringLiteral("queue"));
    facts->addRow(tr("Back on:"), m_queue);
    facts->setRowVisible(m_queue, false);
    facts->addRow(tr("Dead letters:"), new QLabel(locale.toString(count)));
    facts->addRow(tr("By error class:"), wrappingLabel(classText.join(QStringLiteral(" · "))));
    auto *redriven =
        new QLabel(redrivenBefore == 0 ? tr("none")
                   : redrivenBefore == 1
                       ? tr("1 was redriven before and died again")
                       : tr("%1 were redriven before and died again").arg(locale.toString(redrivenBefore)));
    redriven->setObjectName(QStringLiteral("redrivenBefore"));
    if (redrivenBefore > 0)
        redriven->setStyleSheet(QStringLiteral("color: #a15c00; font-weight: bold"));
    facts->addRow(tr("Redriven before:"), redriven);
    // These failed on the partner's or the producer's side for good: without a fix there,
    // they die again at once.
    qint64 permanent = 0;
    for (const QString &errorClass :
         {QStringLiteral("rejected"), QStringLiteral("payload-changed"), QStringLiteral("invalid-message")})
        permanent += classes.value(errorClass);
    // Rejected for our credentials, they died of the partner's refusing everyone, which a
    // fixed token ends: not of anything in them.
    permanent = std::max<qint64>(0, permanent - m_preview.credentialsRefused);
    if (m_preview.credentialsRefused > 0) {
        auto *note = wrappingLabel(
            tr("%1 of them died of a refused credential (HTTP 401, 403 or 407): the partner refused every reminder "
               "then, not these. Once it takes the token, they go through.")
                .arg(locale.toString(m_preview.credentialsRefused)));
        note->setObjectName(QStringLiteral("credentialsNote"));
        facts->addRow(tr("Refused credentials:"), note);
    }
    if (permanent > 0) {
        auto *note =
            wrappingLabel(tr("%1 of them died of a permanent error (rejected, payload changed or invalid): "
                             "unless the cause was fixed, they die again at once")
                              .arg(locale.toString(permanent)));
        note->setObjectName(QStringLiteral("permanentNote"));
        facts->addRow(tr("Permanent errors:"), note);
    }
    m_workers = wrappingLabel(tr("checking…"));
    m_workers->setObjectName(QStringLiteral("workers"));
    facts->addRow(tr("Workers:"), m_workers);
    m_partner = wrappingLabel(tr("checking…"));
    m_partner->setObjectName(QStringLiteral("partner"));
    m_partner->setToolTip(tr("Read from the store's history of sends: the partner answers when at least one "
                             "send in the last minute was accepted"));
    facts->addRow(tr("Partner now:"), m_partner);
    facts->addRow(tr("Audit log entry:"), wrappingLabel(m_auditDetail));
    m_split = wrappingLabel(tr("checking…"));
    m_split->setObjectName(QStringLiteral("split"));
    m_split->setToolTip(tr("Already applied: another delivery of the same reminder took effect, so the worker "
                           "records it as a duplicate and sends nothing. Expired: its reminder is past its "
                           "expires_at (or its partner's expire_after) and can no longer help."));
    facts->addRow(tr("Would be:"), m_split);
    m_expiredNames = wrappingLabel();
    m_expiredNames->setObjectName(QStringLiteral("expiredNames"));
    facts->addRow(tr("Expired:"), m_expiredNames);
    facts->setRowVisible(m_expiredNames, false);

    m_windowWarning = wrappingLabel(
        tr("<b>%1 of them were first sent more than %2 ago,</b> longer than the partner keeps idempotency "
           "keys. "
           "The partner may have forgotten their keys: a resend of an in-doubt event could duplicate.")
            .arg(locale.toString(outsideWindow),
                 idempotencyWindowHours == 1 ? tr("1 hour") : tr("%1 hours").arg(idempotencyWindowHours)));
    m_windowWarning->setObjectName(QStringLiteral("idempotencyWarning"));
    m_windowWarning->setTextFormat(Qt::RichText);
    m_windowWarning->setStyleSheet(QStringLiteral("QLabel { background: #fff4ce; color: #3b2f00; border: 1px "
                                                  "solid #e0b400; border-radius: 3px; padding: 6px; }"));
    m_windowWarning->setVisible(outsideWindow > 0);

    m_readinessWarning = wrappingLabel();
    m_readinessWarning->setObjectName(QStringLiteral("readinessWarning"));
    m_readinessWarning->setTextFormat(Qt::RichText);
    m_readinessWarning->hide();

    m_sample = new QTreeWidget;
    m_sample->setObjectName(QStringLiteral("sample"));
    m_sample->setRootIsDecorated(false);
    m_sample->setUniformRowHeights(true);
    m_sample->setSelectionMode(QAbstractItemView::NoSelection);
    m_sample->setHeaderLabels({tr("Send key"), tr("Error class"), tr("Last error")});
    for (const DeadLetter &letter : std::as_const(m_preview.sample)) {
        auto *item = new QTreeWidgetItem(
            m_sample, {QString::fromLatin1(letter.sendKey), letter.errorClass,
                       QString(letter.lastError).replace(QLatin1Char('\n'), QLatin1Char(' '))});
        item->setToolTip(2, letter.lastError);
    }
    m_sample->header()->setStretchLastSection(true);
    m_sample->resizeColumnToContents(0);
    m_sample->resizeColumnToContents(1);
    m_sample->setColumnWidth(0, std::min(m_sample->columnWidth(0), 360));
    auto *sampleTitle =
        new QLabel(count > SampleSize ? tr("The first %1 of %2:").arg(SampleSize).arg(locale.toString(count))
                                      : tr("All of them:"));

    m_rate = new QSpinBox;
    m_rate->setObjectName(QStringLiteral("rate"));
    m_rate->setRange(1, 100000);
    m_rate->setSuffix(tr(" per second"));
    m_rate->setValue(std::clamp(defaultRatePerSecond, 1, 100000));
    m_rate->setToolTip(tr("At most this many letters put back per second. Slower by itself while the "
                          "workers' partner throttles them, and held while their circuit breaker is open"));
    m_estimate = new QLabel;
    auto *rateRow = new QHBoxLayout;
    rateRow->addWidget(m_rate);
    rateRow->addWidget(m_estimate, 1);
    m_reason = newReasonEdit();
    m_includeExpired = new QCheckBox(tr("Put back expired letters too (workers settle them expired, unsent)"));
    m_includeExpired->setObjectName(QStringLiteral("includeExpired"));
    m_canary = new QSpinBox;
    m_canary->setObjectName(QStringLiteral("canary"));
    m_canary->setRange(0, 100000);
    m_canary->setSpecialValueText(tr("none"));
    m_canary->setSuffix(tr(" letters first"));
    m_canary->setToolTip(tr("Put these back first and wait until they are applied or failed; if none is "
                            "applied, the redrive stops"));
    m_stopAfterFailures = new QSpinBox;
    m_stopAfterFailures->setObjectName(QStringLiteral("stopAfterFailures"));
    m_stopAfterFailures->setRange(0, 1000000);
    m_stopAfterFailures->setSpecialValueText(tr("never"));
    m_stopAfterFailures->setSuffix(tr(" failed sends"));
    m_stopAfterFailures->setToolTip(tr("Stop once the redriven letters' sends failed this often (a throttled "
                                       "answer is not a failure)"));
    auto *guardRow = new QHBoxLayout;
    guardRow->addWidget(new QLabel(tr("Canary:")));
    guardRow->addWidget(m_canary);
    guardRow->addSpacing(16);
    guardRow->addWidget(new QLabel(tr("Stop after:")));
    guardRow->addWidget(m_stopAfterFailures);
    guardRow->addStretch(1);
    auto *rateForm = new QFormLayout;
    rateForm->addRow(tr("Ceiling:"), rateRow);
    rateForm->addRow(QString(), guardRow);
    rateForm->addRow(QString(), m_includeExpired);
    rateForm->addRow(tr("&Reason:"), m_reason);
    m_choices = new QWidget;
    m_choices->setLayout(rateForm);
    rateForm->setContentsMargins(0, 0, 0, 0);

    m_runBar = new QProgressBar;
    m_runBar->setObjectName(QStringLiteral("runProgress"));
    m_pace = wrappingLabel();
    m_pace->setObjectName(QStringLiteral("pace"));
    m_runCounts = wrappingLabel();
    m_runCounts->setObjectName(QStringLiteral("runCounts"));
    auto *runForm = new QFormLayout;
    runForm->setContentsMargins(0, 0, 0, 0);
    runForm->addRow(tr("Progress:"), m_runBar);
    runForm->addRow(tr("Pace:"), m_pace);
    runForm->addRow(tr("So far:"), m_runCounts);
    m_runView = new QWidget;
    m_runView->setLayout(runForm);
    m_runView->hide();
    connect(m_rate, &QSpinBox::valueChanged, this, &RedriveDialog::updateEstimate);
    updateEstimate();

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok);
    m_cancelButton = buttons->addButton(QDialogButtonBox::Cancel);
    m_redriveButton = buttons->button(QDialogButtonBox::Ok);
    m_redriveButton->setText(tr("Redrive %1").arg(locale.toString(count)));
    m_redriveButton->setEnabled(count > 0);
    m_closeButton = buttons->addButton(tr("Hide"), QDialogButtonBox::RejectRole);
    m_closeButton->setObjectName(QStringLiteral("hide"));
    m_closeButton->setToolTip(tr("The redrive goes on; the page shows its progress"));
    m_closeButton->hide();
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (m_running)
            return;
        startRunning();
        emit redriveRequested();
    });
    connect(m_cancelButton, &QPushButton::clicked, this, [this] {
        if (m_running)
            emit cancelRequested();
        else
            reject();
    });
    connect(m_closeButton, &QPushButton::clicked, this, &QDialog::hide);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_headline);
    layout->addWidget(explanation);
    layout->addLayout(facts);
    layout->addWidget(m_readinessWarning);
    layout->addWidget(m_windowWarning);
    layout->addWidget(sampleTitle);
    layout->addWidget(m_sample, 1);
    layout->addWidget(m_choices);
    layout->addWidget(m_runView);
    layout->addWidget(buttons);
    resize(780, 640);
}

RedriveDialog::~RedriveDialog() = default;

int RedriveDialog::sampleCount() const
{
    return m_sample->topLevelItemCount();
}

bool RedriveDialog::showsIdempotencyWarning() const
{
    return !m_windowWarning->isHidden();
}

void RedriveDialog::setQueueDescription(const QString &queue)
{
    m_queue->setText(queue);
    m_facts->setRowVisible(m_queue, !queue.isEmpty());
    const int count = letterCount();
    if (count > 0 && !queue.isEmpty()) {
        const QLocale locale;
        m_headline->setText(count == 1
                                ? tr("Put 1 dead letter back on %1?").arg(queue)
                                : tr("Put %1 dead letters back on %2?").arg(locale.toString(count), queue));
    }
}

QString RedriveDialog::queueDescription() const
{
    return m_queue->text();
}

int RedriveDialog::ratePerSecond() const
{
    return m_rate->value();
}

void RedriveDialog::setRatePerSecond(int rate)
{
    m_rate->setValue(rate);
}

QString RedriveDialog::reason() const
{
    return m_reason->text().trimmed();
}

void RedriveDialog::setReason(const QString &reason)
{
    m_reason->setText(reason);
}

void RedriveDialog::setReadiness(const RedriveReadiness &readiness)
{
    m_readinessKnown = true;
    m_workers->setText(readiness.workersText);
    m_partner->setText(readiness.partnerText);
    m_readinessWarning->setText(readiness.warning);
    // A caution is yellow like the idempotency warning; a warning, red: nothing would send these.
    switch (readiness.severity) {
    case RedriveReadiness::Severity::None:
        break;
    case RedriveReadiness::Severity::Caution:
        m_readinessWarning->setStyleSheet(
            QStringLiteral("QLabel { background: #fff4ce; color: #3b2f00; border: 1px "
                           "solid #e0b400; border-radius: 3px; padding: 6px; }"));
        break;
    case RedriveReadiness::Severity::Warning:
        m_readinessWarning->setStyleSheet(
            QStringLiteral("QLabel { background: #fde7e9; color: #5c0011; border: 1px "
                           "solid #d13438; border-radius: 3px; padding: 6px; }"));
        break;
    }
    m_readinessWarning->setVisible(readiness.severity != RedriveReadiness::Severity::None);
}

void RedriveDialog::setReadinessError(const QString &error)
{
    m_workers->setText(tr("cannot tell: %1").arg(error));
    m_partner->setText(tr("cannot tell"));
}

QString RedriveDialog::workersText() const
{
    return m_workers->text();
}

QString RedriveDialog::partnerText() const
{
    return m_partner->text();
}

QString RedriveDialog::readinessWarning() const
{
    return m_readinessWarning->isHidden() ? QString() : m_readinessWarning->text();
}

void RedriveDialog::setSplit(const once::RedrivePreview &preview)
{
    m_expiredCount = preview.expired;
    QStringList parts{tr("%1 sent").arg(formatCount(preview.wouldSend))};
    parts << tr("%1 already applied (suppressed as duplicates)").arg(formatCount(preview.alreadyApplied));
    parts << tr("%1 expired").arg(formatCount(preview.expired));
    m_split->setText(parts.join(QStringLiteral(" · ")));
    QStringList names;
    for (const auto &letter : preview.expiredLetters.mid(0, 5))
        names << tr("%1 (expired %2; would be %3 late)")
                     .arg(QString::fromLatin1(letter.sendKey), formatDisplayTime(letter.expiresAtMs),
                          formatDuration(letter.lateByMs));
    if (preview.expired > names.size())
        names << tr("and %1 more").arg(formatCount(preview.expired - names.size()));
    m_expiredNames->setText(names.join(QLatin1Char('\n')));
    m_facts->setRowVisible(m_expiredNames, preview.expired > 0);
    m_expiredNames->setStyleSheet(QStringLiteral("color: #a15c00"));
    m_includeExpired->setEnabled(preview.expired > 0);
    m_includeExpired->setText(preview.expired > 0
                                  ? tr("Put back the %1 expired too (workers settle them expired, unsent)")
                                        .arg(formatCount(preview.expired))
                                  : tr("Put back expired letters too (none is expired)"));
}

QString RedriveDialog::splitText() const
{
    return m_split->text();
}

bool RedriveDialog::includeExpired() const
{
    return m_includeExpired->isChecked();
}

void RedriveDialog::setIncludeExpired(bool include)
{
    m_includeExpired->setChecked(include);
}

int RedriveDialog::canary() const
{
    return m_canary->value();
}

void RedriveDialog::setCanary(int letters)
{
    m_canary->setValue(letters);
}

int RedriveDialog::stopAfterFailures() const
{
    return m_stopAfterFailures->value();
}

void RedriveDialog::setStopAfterFailures(int failures)
{
    m_stopAfterFailures->setValue(failures);
}

void RedriveDialog::startRunning()
{
    m_running = true;
    m_choices->setEnabled(false);
    m_choices->hide();
    m_runView->show();
    m_redriveButton->hide();
    m_closeButton->show();
    m_cancelButton->setText(tr("Cancel redrive"));
    m_runBar->setRange(0, std::max(1, letterCount()));
    m_runBar->setValue(0);
    m_pace->setText(tr("starting…"));
    setWindowTitle(tr("Redriving dead letters"));
    const int count = letterCount();
    const QString queue = queueDescription();
    m_headline->setText(queue.isEmpty() ? tr("Putting %1 back on the queue").arg(formatQuantity(count, tr("dead letter"), tr("dead letters")))
                                        : tr("Putting %1 back on %2").arg(formatQuantity(count, tr("dead letter"), tr("dead letters")), queue));
}

void RedriveDialog::setProgress(const once::RedriveProgress &progress)
{
    if (!m_running)
        startRunning();
    m_runBar->setRange(0, int(std::clamp<qint64>(progress.total, 1, std::numeric_limits<int>::max())));
    m_runBar->setValue(int(std::min<qint64>(progress.taken, std::numeric_limits<int>::max())));
    const QString achieved = tr("%1 a second").arg(progress.achievedPerSecond, 0, 'f', 1);
    using Phase = once::RedriveProgress::Phase;
    QString pace;
    switch (progress.phase) {
    case Phase::Moving:
        pace = progress.pacePerSecond > 0
                   ? tr("%1 (ceiling %2 a second)").arg(achieved).arg(progress.pacePerSecond, 0, 'f', 0)
                   : tr("%1 (no ceiling)").arg(achieved);
        break;
    case Phase::Throttled:
        pace = tr("<b>slowed to %1 a second:</b> %2").arg(progress.pacePerSecond, 0, 'f', 1).arg(progress.why.toHtmlEscaped());
        break;
    case Phase::HeldBreakerOpen:
        pace = tr("<b>held:</b> %1").arg(progress.why.toHtmlEscaped());
        break;
    case Phase::WaitingForCanary:
        pace = tr("<b>waiting:</b> %1").arg(progress.why.toHtmlEscaped());
        break;
    case Phase::Finished:
        pace = tr("finished");
        break;
    }
    m_pace->setText(pace);
    const once::RedriveEndings &endings = progress.endings;
    QString counts = tr("%1 of %2 put back").arg(formatCount(progress.moved), formatCount(progress.total));
    if (progress.skippedExpired > 0)
        counts += tr("; %1 expired skipped").arg(formatCount(progress.skippedExpired));
    counts += tr("; since: %1 applied, %2 failed sends, %3 dead again")
                  .arg(formatCount(endings.applied), formatCount(endings.failedSends), formatCount(endings.diedAgain));
    if (endings.expired > 0)
        counts += tr(", %1 expired").arg(formatCount(endings.expired));
    m_runCounts->setText(counts);
}

QString RedriveDialog::paceText() const
{
    return m_pace->text();
}

void RedriveDialog::updateEstimate()
{
    const qint64 seconds = (letterCount() + ratePerSecond() - 1) / ratePerSecond();
    m_estimate->setText(letterCount() > 0 ? tr("takes about %1").arg(durationText(seconds)) : QString());
}

} // namespace once::ui
